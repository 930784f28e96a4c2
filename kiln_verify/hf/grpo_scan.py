"""Stream-verifying a recorded-GRPO corpus against the export it belongs to (§4.7, §4.8).

A GRPO ``train.jsonl`` is checked row by row without holding it: each row the canonical
serialization of its group, one width, one behaviour policy, every completion's
identities equal to the export's model (tokenizer, served model, base aggregate, input
adapter), every group's tokens re-rendered through the exported tokenizer and template, and
the row count and ordered corpus digest the export declares. The verifier and the export
writer both call :func:`scan_grpo_corpus`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kiln_verify.core.digest import GrpoCorpusHasher, Sha256Digest
from kiln_verify.core.jsonio import loads
from kiln_verify.core.paths import open_regular_beneath
from kiln_verify.errors import HfGrpoCorpusInvalid, HfIdentityMismatch, KilnError
from kiln_verify.hf.digests import adapter_content_revision
from kiln_verify.hf.manifest import (
    ExportManifest,
    FileIdentity,
    GrpoGroup,
    grpo_row_bytes,
    parse_grpo_group,
)
from kiln_verify.hf.rerender import TokenRerender
from kiln_verify.limits import MAX_GRPO_DATASET_BYTES, MAX_GRPO_GROUPS, MAX_GRPO_ROW_BYTES

__all__ = [
    "GrpoBinding",
    "GrpoScan",
    "behaviour_adapter",
    "check_grpo_group",
    "iter_grpo_file",
    "scan_grpo_corpus",
]


@dataclass(frozen=True)
class GrpoScan:
    """Totals of a verified GRPO corpus (kiln-hf-trl-contract §4.8)."""

    row_count: int
    completion_count: int
    num_generations: int
    sampled_action_tokens: int
    forced_action_tokens: int
    max_sequence_tokens: int
    ordered_corpus_sha256: Sha256Digest


@dataclass(frozen=True)
class GrpoBinding:
    """The identities every GRPO completion must carry for one export (§4.7)."""

    served_model_id: str
    base_model_sha256: str
    tokenizer: dict[str, str]
    adapter: dict[str, str] | None

    @classmethod
    def of(cls, export: ExportManifest) -> GrpoBinding:
        model = export.model
        adapter = export.input_adapter
        return cls(
            served_model_id=model.served_model_id,
            base_model_sha256=model.base_weight_shard_manifest.aggregate_sha256,
            tokenizer={
                "vocab_sha256": model.tokenizer_vocab_sha256,
                "config_sha256": model.tokenizer.sha256,
                "chat_template_sha256": model.chat_template.sha256,
            },
            adapter=(
                None
                if adapter is None
                else behaviour_adapter(adapter.name, adapter.model, adapter.config)
            ),
        )


def behaviour_adapter(name: str, weights: FileIdentity, config: FileIdentity) -> dict[str, str]:
    """``{name, content_sha256}`` of an exported input adapter (§5.6)."""
    revision = adapter_content_revision(
        Sha256Digest.parse(weights.sha256), weights.size_bytes, Sha256Digest.parse(config.sha256)
    )
    return {"name": name, "content_sha256": "sha256:" + revision}


def check_grpo_group(group: GrpoGroup, binding: GrpoBinding) -> None:
    """A group's identities equal the export's: tokenizer (inference template), served
    model, base aggregate, and the input adapter's content revision or no adapter."""
    for completion in group.completions:
        provenance = completion.provenance
        if provenance.tokenizer.to_json() != binding.tokenizer:
            raise HfGrpoCorpusInvalid(
                "a completion's tokenizer identity is not the exported tokenizer and inference "
                "template"
            )
        policy = provenance.behavior_policy
        if policy.served_model_id != binding.served_model_id:
            raise HfGrpoCorpusInvalid("behavior_policy.served_model_id is not the exported model's")
        if policy.base_model_sha256 != binding.base_model_sha256:
            raise HfGrpoCorpusInvalid(
                "behavior_policy.base_model_sha256 is not the exported base aggregate"
            )
        got_adapter = policy.adapter.to_json() if policy.adapter is not None else None
        if got_adapter != binding.adapter:
            raise HfGrpoCorpusInvalid(
                "behavior_policy.adapter must be absent without an input adapter and equal "
                "the exported input adapter's content revision with one"
            )


def iter_grpo_file(path: str) -> Iterator[tuple[int, bytes, GrpoGroup]]:
    """Canonical rows of a GRPO JSONL file: (1-based line, row bytes without LF, group).

    Each row must be exactly ``grpo_row_bytes`` of the group it parses to; nothing is
    normalized. The file must be a regular non-link file of at most 64 GiB."""
    root, name = os.path.split(os.path.abspath(path))
    with open_regular_beneath(root, name) as fd:
        size = os.fstat(fd).st_size
        if not 0 < size <= MAX_GRPO_DATASET_BYTES:
            raise HfGrpoCorpusInvalid(
                f"the corpus is {size} bytes; it must hold 1 byte .. 64 GiB", path=path
            )
        with os.fdopen(os.dup(fd), "rb") as stream:
            number = 0
            while True:
                line = stream.readline(MAX_GRPO_ROW_BYTES + 1)
                if not line:
                    return
                number += 1
                if len(line) > MAX_GRPO_ROW_BYTES or not line.endswith(b"\n"):
                    raise HfGrpoCorpusInvalid(
                        "the row is longer than MAX_GRPO_ROW_BYTES or lacks its LF",
                        path=path,
                        line=number,
                    )
                try:
                    group = parse_grpo_group(
                        loads(line[:-1], max_bytes=MAX_GRPO_ROW_BYTES), line=number
                    )
                except KilnError as exc:
                    raise exc.at(path=path, line=number) from None
                if grpo_row_bytes(group) != line:
                    raise HfGrpoCorpusInvalid(
                        "the row is not the canonical compact serialization of its group",
                        path=path,
                        line=number,
                        hint="write rows with kiln_verify.hf.manifest.grpo_row_bytes",
                    )
                yield number, line[:-1], group


def scan_grpo_corpus(
    path: str | os.PathLike[str],
    binding: GrpoBinding | None = None,
    *,
    totals: ExportManifest | None = None,
    rerender: TokenRerender | None = None,
) -> GrpoScan:
    """Stream-verify a GRPO corpus: canonical rows, 1..10,000,000 groups, one width, one
    behaviour policy, identities equal to ``binding`` (when given), every group's tokens
    re-rendered through the exported tokenizer and template (``rerender``, when given; the
    export writer and :func:`~kiln_verify.hf.verify.verify_hf_bundle` always give it) and
    the row count and ordered corpus digest ``totals`` declares (when given)."""
    shown = os.fspath(path)
    hasher = GrpoCorpusHasher()
    width = 0
    policy: dict[str, Any] | None = None
    completions = sampled = forced = longest = 0
    for number, row, group in iter_grpo_file(shown):
        if hasher.count >= MAX_GRPO_GROUPS:
            raise HfGrpoCorpusInvalid("more than MAX_GRPO_GROUPS groups", path=shown, line=number)
        if width and len(group.completions) != width:
            raise HfGrpoCorpusInvalid(
                f"the group has {len(group.completions)} completions, earlier groups {width} "
                "(one uniform width is required)",
                path=shown,
                line=number,
            )
        width = len(group.completions)
        for completion in group.completions:
            this = completion.provenance.behavior_policy.to_json()
            if policy is None:
                policy = this
            elif this != policy:
                raise HfGrpoCorpusInvalid(
                    "the corpus mixes behaviour-policy identities", path=shown, line=number
                )
            for token in completion.provenance.action_tokens:
                if token.source == "sampled":
                    sampled += 1
                else:
                    forced += 1
            longest = max(longest, len(completion.provenance.input_token_ids))
        completions += width
        if binding is not None:
            try:
                check_grpo_group(group, binding)
            except KilnError as exc:
                raise exc.at(path=shown, line=number) from None
        if rerender is not None:
            try:
                rerender.check_group(group)
            except KilnError as exc:
                raise exc.at(path=shown, line=number) from None
        hasher.update(row)
    if hasher.count == 0:
        raise HfGrpoCorpusInvalid("the corpus has no groups", path=shown)
    digest = hasher.digest()
    if totals is not None:
        if hasher.count != totals.data.row_count:
            raise HfIdentityMismatch(
                f"train.jsonl has {hasher.count} groups, the export declares "
                f"{totals.data.row_count}",
                path=shown,
            )
        if str(digest) != totals.data.ordered_corpus_sha256:
            raise HfIdentityMismatch(
                "ordered_corpus_sha256 is not the kiln.hf-trl-grpo-corpus.v1 digest of train.jsonl",
                path=shown,
            )
    return GrpoScan(hasher.count, completions, width, sampled, forced, longest, digest)
