"""The whole collection job: check before any network contact, collect, build, publish.

:func:`run_collection` composes the public steps of :mod:`.steps` (inspect, run every
group, assemble, publish) with the checks that must come before any network contact:
the policy's token provenance for ``grpo_output`` (:func:`grpo_tokenizer`) and the output
paths publication would refuse (:func:`check_outputs`). It is its own module so that the
package's ``__init__`` imports nothing: importing one Sans-I/O piece of the collector
(:mod:`.machine`, say) must not load the network stack this job drives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kiln_verify.errors import GrpoOutputUnsupported, PolicyProvenanceMissing
from kiln_verify.openenv.collect.bundle import Bundle, build_bundle
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.engine import ProgressEvent, ProgressHook
from kiln_verify.openenv.collect.publish import check_targets
from kiln_verify.openenv.collect.steps import collect, publish_bundle
from kiln_verify.openenv.policy.base import Policy, TokenizerBound

__all__ = ["check_outputs", "grpo_tokenizer", "output_paths", "run_collection"]


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
