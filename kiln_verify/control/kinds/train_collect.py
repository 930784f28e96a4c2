"""A train run's collection: the behaviour policy's corpus, its bundle and its selection.

:func:`collect_recorded` plays the contract's behaviour adapter with the resident model's
``transformers`` policy and the library's collector, with exact token provenance retained
(the recorded-GRPO corpus is built from the same collection, as ``openenv rollout
--grpo-output`` does). A policy whose identity is not the contract's ``behavior_policy``
is refused before anything is published: the run executes what it sealed.

:func:`publish_train_bundle` (blocking) then builds the three bundle files with the
summary v5 carrying the training contract and the training selection (§5.7) from before
its first publication, publishes them together with the selected GRPO corpus (the
trainer's input, not an artifact), re-reads each artifact as a regular non-symlink file
and binds the manifest. The GRPO rows of the selection are the collection's rows with
exactly the OpenEnv selection's completions and groups kept (:func:`select_grpo_rows`),
so the admitted OpenEnv corpus and the trained one are the same episodes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.control.executor import ARTIFACTS, Published, bind_bundle
from kiln_verify.control.request import BASE_ADAPTER
from kiln_verify.control.training.records import OpenEnvTrainingContract
from kiln_verify.core.publisher import OUTPUT, publish_files
from kiln_verify.errors import PolicyAdapterInvalid, PublishFailed
from kiln_verify.openenv.collect import Collection, CollectionControls, build_bundle, collect
from kiln_verify.openenv.collect.engine import ProgressHook
from kiln_verify.openenv.collect.run import grpo_tokenizer
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.serialize import summary_bytes
from kiln_verify.openenv.records.summary import (
    RolloutSummary,
    TrainingContract,
    check_version_rules,
)
from kiln_verify.openenv.training.selection import Selection, is_no_output, select_for_training

__all__ = [
    "Recorded",
    "TrainBundle",
    "collect_recorded",
    "publish_train_bundle",
    "select_grpo_rows",
]


@dataclass(frozen=True, slots=True, repr=False)
class Recorded:
    """A collection and its full recorded-GRPO corpus (one row per group, plan order)."""

    collection: Collection
    grpo: bytes


@dataclass(frozen=True, slots=True, repr=False)
class TrainBundle:
    """What publication bound, the selection, and the selected GRPO rows."""

    published: Published
    selection: Selection
    grpo: bytes


async def collect_recorded(
    config: object,
    controls: CollectionControls,
    contract: OpenEnvTrainingContract,
    adapter: str,
    progress: ProgressHook,
) -> Recorded:
    """Collect with the resident model playing ``adapter`` and record the GRPO corpus."""
    from kiln_verify.control.config import ServerConfig
    from kiln_verify.control.resident.serving import served_policy
    from kiln_verify.openenv.collect.grpo_corpus import build_grpo_corpus

    assert isinstance(config, ServerConfig)
    policy = await served_policy(config, adapter)
    if policy is None:
        raise PolicyAdapterInvalid(
            f"the behaviour adapter {adapter!r} is no longer played by the resident model"
        )
    try:
        tokenizer = grpo_tokenizer(controls, policy)  # before any network contact
        sealed = contract.behavior_policy
        if sealed is not None and policy.identity().rollout_identity() != sealed.to_json():
            raise PolicyAdapterInvalid(
                f"the behaviour policy playing {adapter!r} is not the one the run sealed"
            )
        collection = await collect(controls, policy, progress=progress)
        close = getattr(policy, "thinking_close_token_ids", None)
        codec = getattr(policy, "token_codec", None)
        assert tokenizer is not None  # grpo_output is always set for a train run
        grpo = build_grpo_corpus(
            collection,
            tokenizer,
            close_token_ids=close() if callable(close) else None,
            codec=codec() if callable(codec) else None,
        )
    finally:
        await policy.aclose()
    return Recorded(collection, grpo)


def _groups(collection: Collection) -> list[AgenticGroup]:
    return [
        AgenticGroup(messages=g.messages, completions=[e.rollout for e in g.episodes])
        for g in collection.groups
    ]


def select_grpo_rows(grpo: bytes, groups: Sequence[AgenticGroup], selection: Selection) -> bytes:
    """The GRPO rows of exactly the selection's groups and completions (same order)."""
    from kiln_verify.hf.manifest import GrpoGroup, grpo_row_bytes

    rows = grpo.splitlines(keepends=True)
    if len(rows) != len(groups):
        raise PublishFailed(f"the GRPO corpus has {len(rows)} rows for {len(groups)} groups")
    kept_rows: list[bytes] = []
    for row, group in zip(rows, groups, strict=True):
        kept = [i for i, c in enumerate(group.completions) if not is_no_output(c)]
        rewards = {group.completions[i].reward for i in kept}
        if len(rewards) < 2:
            continue  # no usable output, or no reward gradient: skipped (§5.7)
        if len(kept) == len(group.completions):
            kept_rows.append(row)
            continue
        record = GrpoGroup.from_json(json.loads(row))
        completions = [record.completions[i] for i in kept]
        kept_rows.append(grpo_row_bytes(record.model_copy(update={"completions": completions})))
    if len(kept_rows) != selection.record.groups_submitted:
        raise PublishFailed("the GRPO rows disagree with the training selection")
    return b"".join(kept_rows)


def _summary(
    record: RolloutSummary, contract: OpenEnvTrainingContract, adapter: str, selection: Selection
) -> bytes:
    label = None if adapter == BASE_ADAPTER else adapter
    summary = RolloutSummary.from_json(
        {
            **record.to_json(),
            "adapter": label,
            "adapter_label": adapter,
            "training_selection": selection.record.to_json(),
            "training_contract": TrainingContract.from_json(contract.to_json()).to_json(),
        }
    )
    check_version_rules(summary)
    return summary_bytes(summary)


def publish_train_bundle(
    recorded: Recorded,
    contract: OpenEnvTrainingContract,
    adapter: str,
    run_dir: Path,
    run_id: str,
    corpus_name: str,
) -> TrainBundle:
    """Build, publish and bind the bundle and the selected GRPO corpus (blocking)."""
    collection = recorded.collection
    groups = _groups(collection)
    selection = select_for_training(groups)
    grpo = select_grpo_rows(recorded.grpo, groups, selection)
    bundle = build_bundle(collection)
    summary = _summary(bundle.record, contract, adapter, selection)
    files = [
        (run_dir / ARTIFACTS["dataset"].name, bundle.dataset),
        (run_dir / ARTIFACTS["replay"].name, bundle.replay),
        (run_dir / ARTIFACTS["summary"].name, summary),
    ]
    if grpo:
        corpus = run_dir / corpus_name
        corpus.parent.mkdir(exist_ok=True)
        files.append((corpus, grpo))
    publish_files(files, wording=OUTPUT)
    published = bind_bundle(bundle.record, run_dir, run_id)
    return TrainBundle(published, selection, grpo)
