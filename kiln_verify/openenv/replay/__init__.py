"""Exact live replay of a verified OpenEnv bundle (kiln-openenv-contract §7.1, §7.2).

==============  ===========================================================================
module          job
==============  ===========================================================================
``compare``     type-strict JSON comparison: the first differing path, bounded values
``candidate``   one candidate: capacity-aware session, reset, recorded steps, final state
``engine``      verification, credential slots, rediscovery, groups, the run report
==============  ===========================================================================

:func:`replay_bundle` is the whole job; any difference is a
:class:`~kiln_verify.errors.ReplayDrift` naming environment, group, candidate, step and
field.
"""

from __future__ import annotations

from kiln_verify.errors import ReplayDrift
from kiln_verify.openenv.replay.candidate import CandidateOutcome, ReplayTarget, replay_candidate
from kiln_verify.openenv.replay.compare import Difference, first_difference, result_difference
from kiln_verify.openenv.replay.engine import (
    DEFAULT_CAPACITY_WAIT_S,
    DEFAULT_CONCURRENCY,
    replay_bundle,
    replay_manifest,
)

__all__ = [
    "DEFAULT_CAPACITY_WAIT_S",
    "DEFAULT_CONCURRENCY",
    "CandidateOutcome",
    "Difference",
    "ReplayDrift",
    "ReplayTarget",
    "first_difference",
    "replay_bundle",
    "replay_candidate",
    "replay_manifest",
    "result_difference",
]
