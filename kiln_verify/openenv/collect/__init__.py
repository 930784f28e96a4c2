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
==============  ===========================================================================

:func:`run_collection` is the whole job: :func:`collect` (inspect, run every group,
assemble), build, :func:`publish_bundle`. The steps are public so that other code
combines them (a shard of groups, episodes run elsewhere). With ``grpo_output`` the
GRPO corpus is a fourth file published in the same all-or-nothing step; the policy must be
:class:`~kiln_verify.openenv.policy.base.TokenizerBound`, checked before any network
contact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kiln_verify.errors import GrpoOutputUnsupported, PolicyProvenanceMissing
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
from kiln_verify.openenv.collect.steps import (
    Environments,
    assemble_collection,
    collect,
    inspect_environments,
    publish_bundle,
    run_groups,
)
from kiln_verify.openenv.policy.base import Policy, TokenizerBound
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


def grpo_tokenizer(controls: CollectionControls, policy: Policy) -> Mapping[str, str] | None:
    """``None`` without ``grpo_output``; else the policy's tokenizer identity, or
    ``policy_provenance_missing`` when the policy cannot record token provenance."""
    if controls.grpo_output is None:
        return None
    if not isinstance(policy, TokenizerBound):
        why = getattr(policy, "PROVENANCE_UNAVAILABLE", None)
        raise PolicyProvenanceMissing(
            f"`grpo_output` needs a policy that records exact token provenance from one "
            f"tokenizer; {type(policy).__name__} does not" + (f" ({why})" if why else ""),
            fields=("grpo_output",),
        )
    if controls.options.thinking_budget_tokens is not None and not callable(
        getattr(policy, "thinking_close_token_ids", None)
    ):
        raise GrpoOutputUnsupported(
            f"`grpo_output` with `thinking_budget_tokens` needs a policy that forces the "
            f"thinking close tokens and names them; {type(policy).__name__} does not",
            fields=("grpo_output", "thinking_budget_tokens"),
        )
    return policy.tokenizer_identity()


def output_paths(controls: CollectionControls) -> list[str]:
    """The files a collection publishes: the three bundle files, then the GRPO corpus."""
    paths = [controls.output, controls.replay_output, controls.summary_output]
    if controls.grpo_output is not None:
        paths.append(controls.grpo_output)
    return paths


def check_outputs(controls: CollectionControls) -> None:
    """Refuse output paths that publication would refuse (a missing or symlinked parent,
    an existing target without ``force``, a target that is not a regular file), before
    any network contact: an hour of model calls must never be lost to a typo."""
    check_targets(output_paths(controls), force=controls.force)


async def run_collection(
    controls: CollectionControls,
    policy: Policy,
    *,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
) -> Bundle:
    """Collect, build the files and publish them together; the bundle is returned.

    ``progress`` also hears ``publishing`` right before the files are written (from then
    on the work is synchronous and ends published or rolled back) and ``published``.
    """
    tokenizer = grpo_tokenizer(controls, policy)  # before any network contact
    check_outputs(controls)
    notify = progress or (lambda event: None)
    collection = await collect(controls, policy, environ=environ, progress=progress)
    bundle = build_bundle(collection)
    if controls.grpo_output is not None and tokenizer is not None:
        from kiln_verify.openenv.collect.grpo_corpus import build_grpo_corpus  # HF records

        close = getattr(policy, "thinking_close_token_ids", None)
        codec = getattr(policy, "token_codec", None)
        grpo = build_grpo_corpus(
            collection,
            tokenizer,
            close_token_ids=close() if callable(close) else None,
            codec=codec() if callable(codec) else None,
        )
        bundle = dataclasses.replace(bundle, grpo=grpo)
    notify(ProgressEvent("publishing"))
    publish_bundle(
        bundle,
        controls.output,
        controls.replay_output,
        controls.summary_output,
        grpo=controls.grpo_output if bundle.grpo is not None else None,
        force=controls.force,
    )
    notify(ProgressEvent("published"))
    return bundle
