"""SFT row admission: messages JSONL in, kept examples and ``kiln.sft-ingestion.v1`` out.

Rules (kiln-hf-trl-contract §4.6): blank or whitespace-only lines are transport whitespace
and are not counted; every other line is a row, numbered from 1. A row is kept when it is
a JSON object ``{"messages": [...]}`` whose messages are chat messages (``role``,
``content``, optional ``tool_calls``, ``name``, ``tool_call_id``) with roles among
``system``, ``user``, ``assistant``, ``tool``, and when it renders through the TRL
training template and tokenizes with at least one assistant (generation-block) token.
Reasons for rejection: ``invalid_json`` (unparseable, or not the example shape),
``empty_messages``, ``invalid_role``, ``tokenization_error``. Under ``fail`` the first
rejected row aborts the export; under ``skip`` it is recorded. Zero kept rows is an error.

Kept row hash: ``kiln.sft-parsed-row.v1`` over the canonical JSON of the parsed example;
rejected unparseable rows hash their trimmed raw bytes (``kiln.sft-raw-row.v1``). The
exported ``train.jsonl`` holds each kept example as compact struct-order JSON plus LF.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import Field

from kiln_verify.core.jsonio import dumps_compact, loads
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import HfExportInvalid, HfSftRowRejected, KilnError
from kiln_verify.hf.digests import kept_corpus_digest, sft_parsed_row_digest, sft_raw_row_digest
from kiln_verify.hf.manifest import RejectedRow, SftIngestionReceipt
from kiln_verify.hf.manifest.sft import InvalidRowPolicy, RejectionReason, SftSource
from kiln_verify.limits import MAX_SFT_DATASET_BYTES, MAX_SFT_ROW_BYTES
from kiln_verify.records import ChatMessage, Record, validate_record

__all__ = [
    "VALID_ROLES",
    "SftExample",
    "SftIngestion",
    "ingest_sft_file",
    "sft_row_bytes",
    "token_checker",
]

VALID_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})


class SftExample(Record):
    """One SFT example: ``{"messages": [...]}`` (the exported ``train.jsonl`` row)."""

    messages: list[ChatMessage] = Field(min_length=1)


def sft_row_bytes(example: SftExample) -> bytes:
    """The exported row: compact struct-order JSON plus one LF."""
    return dumps_compact(example.to_json()) + b"\n"


@dataclass
class SftIngestion:
    """The kept examples (in order) and the receipt recording every decision."""

    examples: list[SftExample]
    receipt: SftIngestionReceipt
    dataset: bytes = field(repr=False)


def _iter_rows(path: str) -> Iterator[tuple[int, bytes]]:
    with open_regular(path) as fd:
        size = os.fstat(fd).st_size
        if size > MAX_SFT_DATASET_BYTES:
            raise HfExportInvalid(
                f"the dataset is {size} bytes, more than MAX_SFT_DATASET_BYTES", path=path
            )
        with os.fdopen(os.dup(fd), "rb") as stream:
            number = 0
            while True:
                line = stream.readline(MAX_SFT_ROW_BYTES + 1)
                if not line:
                    return
                if len(line) > MAX_SFT_ROW_BYTES:
                    raise HfExportInvalid(
                        f"a row is longer than MAX_SFT_ROW_BYTES = {MAX_SFT_ROW_BYTES}",
                        path=path,
                        line=number + 1,
                    )
                if not line.strip(b" \t\r\n"):
                    continue
                number += 1
                yield number, line


TokenCheck = Callable[[SftExample], str | None]
"""Returns ``None`` when the example tokenizes with assistant tokens, else the reason."""


def _classify(raw: bytes, check: TokenCheck) -> tuple[SftExample | None, RejectionReason, str]:
    try:
        value = loads(raw.strip(b" \t\r\n"), max_bytes=MAX_SFT_ROW_BYTES)
    except KilnError as exc:
        return None, "invalid_json", exc.rule
    if isinstance(value, dict) and value.get("messages") == []:
        return None, "empty_messages", "messages is empty"
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        for message in value["messages"]:
            role = message.get("role") if isinstance(message, dict) else None
            if isinstance(role, str) and role not in VALID_ROLES:
                return None, "invalid_role", f"role {role[:40]!r} is not system/user/assistant/tool"
    try:
        example = validate_record(SftExample, value)
    except KilnError as exc:
        return None, "invalid_json", exc.rule
    problem = check(example)
    if problem is not None:
        return None, "tokenization_error", problem
    return example, "invalid_json", ""


def ingest_sft_file(
    path: str,
    *,
    policy: InvalidRowPolicy,
    check: TokenCheck,
    source: SftSource = "dataset_path",
    source_locator: str | None = None,
) -> SftIngestion:
    """Admit the rows of ``path`` under ``policy``; ``check`` is the tokenization rule."""
    examples: list[SftExample] = []
    kept: list[str] = []
    rejected: list[RejectedRow] = []
    rows_read = 0
    for number, raw in _iter_rows(path):
        rows_read = number
        example, reason, why = _classify(raw, check)
        if example is None:
            if policy == "fail":
                raise HfSftRowRejected(
                    f"row {number} is rejected ({reason}): {why}", path=path, line=number
                )
            if reason == "invalid_json":
                digest = sft_raw_row_digest(raw)
            else:
                digest = sft_parsed_row_digest(
                    loads(raw.strip(b" \t\r\n"), max_bytes=MAX_SFT_ROW_BYTES)
                )
            rejected.append(RejectedRow(row_index=number, row_sha256=str(digest), reason=reason))
            continue
        examples.append(example)
        kept.append(str(sft_parsed_row_digest(example.to_json())))
    if not examples:
        raise HfSftRowRejected(
            f"no row was kept ({rows_read} read, {len(rejected)} rejected)",
            path=path,
            hint="the dataset needs at least one valid conversation with an assistant reply",
        )
    receipt = SftIngestionReceipt(
        schema="kiln.sft-ingestion.v1",
        source=source,
        source_locator=source_locator,
        invalid_row_policy=policy,
        rows_read=rows_read,
        rows_kept=len(kept),
        rows_rejected=len(rejected),
        kept_row_hashes=kept,
        rejected_rows=rejected,
        kept_corpus_sha256=str(kept_corpus_digest(kept)),
    )
    dataset = b"".join(sft_row_bytes(example) for example in examples)
    return SftIngestion(examples, receipt, dataset)


def token_checker(training_template: str, tokenizer_json: bytes) -> TokenCheck:
    """The tokenization rule: the row renders through the TRL template and at least one
    token of the exported tokenizer lies inside a generation block."""
    from kiln_verify.hf.export.template import render

    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - tokenizers ships with the train extra
        raise HfExportInvalid(
            "tokenizing rows needs tokenizers", hint="install kiln-verify[train]"
        ) from None
    try:
        tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
    except Exception as exc:
        raise HfExportInvalid(f"tokenizer.json does not load: {str(exc)[:80]}") from None

    def check(example: SftExample) -> str | None:
        messages: list[dict[str, Any]] = [m.to_json() for m in example.messages]
        try:
            rendered = render(training_template, messages)
        except ValueError as exc:
            return str(exc)[:200]
        if not rendered.spans:
            return "the row has no assistant reply inside a generation block"
        encoding = tokenizer.encode(rendered.text, add_special_tokens=False)
        for start, end in encoding.offsets:
            if end > start and any(start < b and end > a for a, b in rendered.spans):
                return None
        return "no token falls inside an assistant generation block"

    return check
