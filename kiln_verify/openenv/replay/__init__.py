"""Exact live replay of a verified OpenEnv bundle (kiln-openenv-contract §7.1, §7.2).

===============  ==========================================================================
module           job
===============  ==========================================================================
``compare``      type-strict JSON comparison: the first differing path, bounded values,
                 a window around the first differing character of two strings
``candidate``    one candidate: capacity-aware session, reset, every recorded step, final
                 state under the volatile-identity rule; collects every drift
``remap``        ``--environment-url OLD=NEW`` and provider remaps: the URL to reach and
                 the identity expected there
``rediscovery``  complete rediscovery of one environment vs its captured identity
``diagnose``     the likely cause of a drift, as the error's hint
``detail``       every drifted exchange kept (bounded), grouped by candidate, for reports
``tally``        totals over the whole replay and the one ``replay_drift`` error
``engine``       verification, credential slots, remaps, groups, the run report
===============  ==========================================================================

:func:`replay_bundle` is the whole job; any difference is a
:class:`~kiln_verify.errors.ReplayDrift` naming environment, group, candidate, step and
field of the first drift, with the counts of every drifted candidate and exchange and
(in its ``detail``, for the replay report) every drifted exchange kept, by candidate.
"""

from __future__ import annotations

from kiln_verify.errors import ReplayDrift
from kiln_verify.openenv.replay.candidate import CandidateOutcome, ReplayTarget, replay_candidate
from kiln_verify.openenv.replay.compare import Difference, first_difference, result_difference
from kiln_verify.openenv.replay.engine import (
    DEFAULT_CAPACITY_WAIT_S,
    DEFAULT_CONCURRENCY,
    EnvironmentProvider,
    replay_bundle,
    replay_manifest,
)
from kiln_verify.openenv.replay.remap import UrlRemap, parse_environment_url

__all__ = [
    "DEFAULT_CAPACITY_WAIT_S",
    "DEFAULT_CONCURRENCY",
    "CandidateOutcome",
    "Difference",
    "EnvironmentProvider",
    "ReplayDrift",
    "ReplayTarget",
    "UrlRemap",
    "first_difference",
    "parse_environment_url",
    "replay_bundle",
    "replay_candidate",
    "replay_manifest",
    "result_difference",
]
