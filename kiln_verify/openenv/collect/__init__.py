"""The rollout collector: controls → plan → episodes → three files published together.

==============  ===========================================================================
module          job
==============  ===========================================================================
``controls``    :class:`CollectionControls`: every §5.1 check before any network contact
``plan``        reset plan (seed-free templates), deterministic group plan, retained budget
``episode``     one candidate episode: the §5.4 loop and the §7.3 outcome table
``engine``      :func:`collect`: discovery, groups, integrity, revalidation
``bundle``      :func:`build_bundle`: the corpus, replay and summary bytes; statistics
``publish``     :func:`publish_together`: the three files appear together or not at all
==============  ===========================================================================

:func:`run_collection` is the whole job: collect, build, publish.
"""

from __future__ import annotations

from collections.abc import Mapping

from kiln_verify.openenv.collect.bundle import LOCAL_KILN_URL, Bundle, build_bundle
from kiln_verify.openenv.collect.controls import (
    DEFAULT_DATASET,
    DEFAULT_REPLAY,
    DEFAULT_SUMMARY,
    CollectionControls,
    load_reset_options,
)
from kiln_verify.openenv.collect.engine import (
    CollectedGroup,
    Collection,
    ProgressEvent,
    ProgressHook,
    collect,
)
from kiln_verify.openenv.collect.plan import GroupPlan, ResetPlan, RetainedBudget, group_plan
from kiln_verify.openenv.collect.publish import publish_together
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.records.prompt import parse_model_action

__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_REPLAY",
    "DEFAULT_SUMMARY",
    "LOCAL_KILN_URL",
    "Bundle",
    "CollectedGroup",
    "Collection",
    "CollectionControls",
    "GroupPlan",
    "ProgressEvent",
    "ProgressHook",
    "ResetPlan",
    "RetainedBudget",
    "build_bundle",
    "collect",
    "group_plan",
    "load_reset_options",
    "parse_model_action",
    "publish_together",
    "run_collection",
]


async def run_collection(
    controls: CollectionControls,
    policy: Policy,
    *,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
) -> Bundle:
    """Collect, build the three files and publish them together; the bundle is returned."""
    collection = await collect(controls, policy, environ=environ, progress=progress)
    bundle = build_bundle(collection)
    publish_together(
        [
            (controls.output, bundle.dataset),
            (controls.replay_output, bundle.replay),
            (controls.summary_output, bundle.summary),
        ],
        force=controls.force,
    )
    return bundle
