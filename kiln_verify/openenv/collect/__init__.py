"""The rollout collector: controls → plan → episodes → three files published together.

==============  ===========================================================================
module          job
==============  ===========================================================================
``controls``    :class:`CollectionOptions` (declared once) and :class:`CollectionControls`:
                every §5.1 check before any network contact
``plan``        reset plan (seed-free templates), deterministic group plan, retained budget
``machine``     one candidate episode as a Sans-I/O state machine: §5.4, the §7.3 table
``assemble``    a finished episode's validated corpus, replay and summary records
``episode``     the asyncio driver of one episode (session, policy call, keep-alive)
``engine``      the records steps pass along; the integrity and revalidation rules
``steps``       :func:`inspect_environments`, :func:`run_groups` (a range of the plan),
                :func:`assemble_collection`, :func:`publish_bundle`; :func:`collect`
``bundle``      :func:`build_bundle`: the corpus, replay and summary bytes; statistics
``grpo_corpus`` :func:`build_grpo_corpus`: the optional ``--grpo-output`` GRPO rows
``publish``     :func:`publish_together`: the three files appear together or not at all
``run``         :func:`run_collection`, and the checks it makes before any network contact
``journal``     the journal on disk: framed, fsynced, digest-chained entries; the reader
``journal_records``  a finished group to its journal entry and back; the resume rules
``journaled``   ``--journal``/``--resume``/``--groups-range``: the steps with a journal
``merge``       shards (sealed journals of group ranges) into the single-host bundle
==============  ===========================================================================

:func:`run_collection` is the whole job: :func:`collect` (inspect, run every group,
assemble), build, :func:`publish_bundle`. The steps are public so that other code
combines them (a shard of groups, episodes run elsewhere). With ``grpo_output`` the
GRPO corpus is a fourth file published in the same all-or-nothing step; the policy must be
:class:`~kiln_verify.openenv.policy.base.TokenizerBound`, checked before any network
contact.

Importing this package imports none of its modules: each public name is imported from its
module on first access (a module ``__getattr__``, PEP 562, as :mod:`kiln_verify` does), so
``import kiln_verify.openenv.collect.machine`` (the Sans-I/O episode machine) loads no
network library, and ``from kiln_verify.openenv.collect import run_collection`` loads the
whole collector as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kiln_verify.core.lazy import lazy_exports

if TYPE_CHECKING:
    from kiln_verify.openenv.collect.bundle import LOCAL_KILN_URL, Bundle, build_bundle
    from kiln_verify.openenv.collect.controls import (
        DEFAULT_DATASET,
        DEFAULT_REPLAY,
        DEFAULT_SUMMARY,
        CollectionControls,
        CollectionOptions,
        load_reset_options,
    )
    from kiln_verify.openenv.collect.engine import (
        CollectedGroup,
        Collection,
        ProgressEvent,
        ProgressHook,
        Reinspection,
    )
    from kiln_verify.openenv.collect.plan import GroupPlan, ResetPlan, RetainedBudget, group_plan
    from kiln_verify.openenv.collect.publish import check_targets, publish_together
    from kiln_verify.openenv.collect.run import (
        check_outputs,
        grpo_tokenizer,
        run_collection,
    )
    from kiln_verify.openenv.collect.run import (
        output_paths as output_paths,
    )
    from kiln_verify.openenv.collect.steps import (
        Environments,
        assemble_collection,
        collect,
        inspect_environments,
        publish_bundle,
        run_groups,
    )
    from kiln_verify.openenv.policy.base import Policy as Policy
    from kiln_verify.openenv.policy.base import TokenizerBound as TokenizerBound
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
    "CollectionOptions",
    "Environments",
    "GroupPlan",
    "ProgressEvent",
    "ProgressHook",
    "Reinspection",
    "ResetPlan",
    "RetainedBudget",
    "assemble_collection",
    "build_bundle",
    "check_outputs",
    "check_targets",
    "collect",
    "group_plan",
    "grpo_tokenizer",
    "inspect_environments",
    "load_reset_options",
    "parse_model_action",
    "publish_bundle",
    "publish_together",
    "run_collection",
    "run_groups",
]

_LAZY: Final[dict[str, str]] = {
    "LOCAL_KILN_URL": "kiln_verify.openenv.collect.bundle",
    "Bundle": "kiln_verify.openenv.collect.bundle",
    "build_bundle": "kiln_verify.openenv.collect.bundle",
    "DEFAULT_DATASET": "kiln_verify.openenv.collect.controls",
    "DEFAULT_REPLAY": "kiln_verify.openenv.collect.controls",
    "DEFAULT_SUMMARY": "kiln_verify.openenv.collect.controls",
    "CollectionControls": "kiln_verify.openenv.collect.controls",
    "CollectionOptions": "kiln_verify.openenv.collect.controls",
    "load_reset_options": "kiln_verify.openenv.collect.controls",
    "CollectedGroup": "kiln_verify.openenv.collect.engine",
    "Collection": "kiln_verify.openenv.collect.engine",
    "ProgressEvent": "kiln_verify.openenv.collect.engine",
    "ProgressHook": "kiln_verify.openenv.collect.engine",
    "Reinspection": "kiln_verify.openenv.collect.engine",
    "GroupPlan": "kiln_verify.openenv.collect.plan",
    "ResetPlan": "kiln_verify.openenv.collect.plan",
    "RetainedBudget": "kiln_verify.openenv.collect.plan",
    "group_plan": "kiln_verify.openenv.collect.plan",
    "check_targets": "kiln_verify.openenv.collect.publish",
    "publish_together": "kiln_verify.openenv.collect.publish",
    "check_outputs": "kiln_verify.openenv.collect.run",
    "grpo_tokenizer": "kiln_verify.openenv.collect.run",
    "output_paths": "kiln_verify.openenv.collect.run",
    "run_collection": "kiln_verify.openenv.collect.run",
    "Environments": "kiln_verify.openenv.collect.steps",
    "assemble_collection": "kiln_verify.openenv.collect.steps",
    "collect": "kiln_verify.openenv.collect.steps",
    "inspect_environments": "kiln_verify.openenv.collect.steps",
    "publish_bundle": "kiln_verify.openenv.collect.steps",
    "run_groups": "kiln_verify.openenv.collect.steps",
    "Policy": "kiln_verify.openenv.policy.base",
    "TokenizerBound": "kiln_verify.openenv.policy.base",
    "parse_model_action": "kiln_verify.openenv.records.prompt",
}
"""Where each name this package has always offered lives; imported on first access."""


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
