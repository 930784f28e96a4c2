"""The export writers: ``NAME.kiln-hf/`` and ``NAME.kiln-hf.tar.gz``, published as a pair.

Discipline (kiln-hf-trl-contract §5.8, docs/hf-contract.md "Publication"): both targets
are refused up front when they exist, after the leftovers of an interrupted export of the
same name have been rolled back (:func:`kiln_verify.core.publisher.recover_group`:
never a complete export, never anything changed since). Everything is built in one
private staging directory beside the targets: the bundle directory (every file created
new and fsynced, identities taken from the staged bytes, the manifest written last, the
complete verifier run on it), then the deterministic archive of it (sorted USTAR entries,
mtime 0, uid/gid 0, fixed modes, single root ``NAME.kiln-hf``), verified by extracting it.
Only then are both published by one journaled commit (archive first, then directory; the
published directory is verified again before the commit point). An interruption leaves
both or neither, or a journal that the next export of that name rolls back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kiln_verify.core.digest import identify, sha256_bytes
from kiln_verify.core.publish import staged_directory
from kiln_verify.core.publisher import recover_group, staged_group
from kiln_verify.core.safe_tar import write_tar_gz
from kiln_verify.errors import HfExportInvalid, HfIdentityMismatch, TargetExists, UsageError
from kiln_verify.hf.bundle_files import ARCHIVE_SUFFIX, BUNDLE_SUFFIX, EXPORT_MANIFEST
from kiln_verify.hf.export.model_dir import ModelSnapshot
from kiln_verify.hf.export.sft import ingest_sft_file, token_checker
from kiln_verify.hf.export.source import ExportSource, InputAdapter
from kiln_verify.hf.grpo_scan import GrpoBinding, scan_grpo_corpus
from kiln_verify.hf.manifest import (
    ExecutionProvenance,
    ExportManifest,
    FileIdentity,
    ModelProvenance,
    document_bytes,
)
from kiln_verify.hf.manifest.sft import InvalidRowPolicy, SftSource
from kiln_verify.hf.rerender import TokenRerender
from kiln_verify.hf.verify import HfBundleReport, verify_hf_archive, verify_hf_bundle
from kiln_verify.limits import MAX_MODEL_FILE_BYTES

__all__ = [
    "EXPORT_NAME_PATTERN",
    "ExportOutcome",
    "export_grpo",
    "export_sft",
    "plan_targets",
]

EXPORT_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
"""1..128 ASCII characters, first alphanumeric, then alphanumerics, ``_`` and ``-`` (§7)."""


@dataclass(frozen=True)
class ExportOutcome:
    directory: Path
    archive: Path
    report: HfBundleReport


def plan_targets(name: str, output: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(NAME.kiln-hf directory, NAME.kiln-hf.tar.gz)``; both must not exist yet."""
    if not isinstance(name, str) or not EXPORT_NAME_PATTERN.fullmatch(name):
        raise UsageError(
            "--name must be 1..128 ASCII characters: a letter or digit, then letters, "
            "digits, '_' or '-'"
        )
    archive = Path(output)
    if archive.name != name + ARCHIVE_SUFFIX:
        raise UsageError(f"--output must be named {name}{ARCHIVE_SUFFIX}", path=str(archive))
    if not archive.parent.is_dir():
        raise UsageError("the output directory does not exist", path=str(archive.parent))
    directory = archive.parent / (name + BUNDLE_SUFFIX)
    recover_group(archive.parent, directory.name)  # an interrupted export of this name
    for target in (archive, directory):
        if os.path.lexists(target):
            raise TargetExists(
                "the export target already exists; exports never replace anything",
                path=str(target),
                hint="choose another --name or remove the old export",
            )
    return directory, archive


def _write(
    directory: Path,
    archive: Path,
    files: Mapping[str, bytes | Path],
    build: Callable[[dict[str, FileIdentity]], ExportManifest],
) -> ExportOutcome:
    reports: dict[str, HfBundleReport] = {}

    def published_check() -> None:
        report = verify_hf_bundle(directory)
        if report.export_sha256 != reports["archive"].export_sha256:
            raise HfIdentityMismatch("the published export reads back differently", path=directory)
        reports["published"] = report

    with staged_group(
        directory.parent,
        (archive.name, directory.name),
        key=directory.name,
        before_commit=published_check,
    ) as group:
        staged_root = Path(group.entry(directory.name))
        with staged_directory(staged_root, dir_mode=0o755, file_mode=0o644) as stage:
            for relative, content in sorted(files.items()):
                if isinstance(content, Path):
                    stage.copy_file(relative, content, max_bytes=MAX_MODEL_FILE_BYTES)
                else:
                    stage.write_bytes(relative, content)
            identities = {
                relative: FileIdentity.from_artifact(
                    identify(stage.path, relative, max_bytes=MAX_MODEL_FILE_BYTES)
                )
                for relative in files
            }
            manifest = build(identities)
            stage.write_bytes(EXPORT_MANIFEST, document_bytes(manifest))
            staged = verify_hf_bundle(stage.path)
            if staged.export_sha256 != manifest.export_sha256:
                raise HfIdentityMismatch(
                    "the staged manifest reads back differently", path=stage.path
                )
        staged_archive = group.entry(archive.name)
        write_tar_gz(staged_root, staged_archive, root_name=directory.name)
        reports["archive"] = verify_hf_archive(staged_archive, scratch_parent=group.path)
        if reports["archive"].export_sha256 != manifest.export_sha256:
            raise HfIdentityMismatch(
                "the archive does not hold the staged export", path=staged_archive
            )
    return ExportOutcome(directory, archive, reports["published"])


def _manifest_fields(
    task: str,
    snapshot: ModelSnapshot,
    ids: dict[str, FileIdentity],
    data: dict[str, Any],
    adapter: InputAdapter | None,
) -> dict[str, Any]:
    provenance = ExecutionProvenance.for_this_process(
        ModelProvenance(
            model_config_sha256=ids["kiln_model_config.json"].sha256,
            tokenizer_vocab_sha256=str(snapshot.vocab_sha256),
            tokenizer_config_sha256=ids["tokenizer.json"].sha256,
            chat_template_sha256=ids["chat_template.jinja"].sha256,
            training_chat_template_sha256=ids["kiln_training_chat_template.jinja"].sha256,
        ),
        inference_dtype=snapshot.inference_dtype,
    )
    if "split_manifest.json" in ids:
        data["split_manifest"] = ids["split_manifest.json"]
    fields: dict[str, Any] = {
        "task": task,
        "source_execution_provenance": provenance,
        "model": {
            "served_model_id": snapshot.served_model_id,
            "base_weight_shard_manifest": snapshot.shards,
            "tokenizer_vocab_sha256": str(snapshot.vocab_sha256),
            "model_config": ids["kiln_model_config.json"],
            "tokenizer": ids["tokenizer.json"],
            "chat_template": ids["chat_template.jinja"],
            "native_training_chat_template": ids["kiln_training_chat_template.jinja"],
            "trl_training_chat_template": ids["training_chat_template.jinja"],
        },
        "data": data,
        "reference_script": ids["train.py"],
        "environment_lock": ids["requirements.lock"],
    }
    if adapter is not None:
        entry: dict[str, Any] = {
            "name": adapter.name,
            "config": ids["input_adapter/adapter_config.json"],
            "model": ids["input_adapter/adapter_model.safetensors"],
        }
        if "input_adapter/adapter_manifest.json" in ids:
            entry["kiln_manifest"] = ids["input_adapter/adapter_manifest.json"]
        fields["input_adapter"] = entry
    return fields


def _create(fields: dict[str, Any]) -> ExportManifest:
    try:
        return ExportManifest.create(**fields)
    except ValueError as exc:  # pydantic: a rule the inputs break (bounded text, ...)
        raise HfExportInvalid(f"the export manifest would be invalid: {str(exc)[:300]}") from None


def export_sft(
    source: ExportSource,
    *,
    dataset: str | os.PathLike[str],
    name: str,
    output: str | os.PathLike[str],
    invalid_row_policy: InvalidRowPolicy = "fail",
    data_source: SftSource = "dataset_path",
    data_locator: str | None = None,
) -> ExportOutcome:
    """Export an SFT bundle (``NAME.kiln-hf/`` and ``NAME.kiln-hf.tar.gz`` beside it).

    ``data_source`` is the receipt's ``source``: ``dataset_path`` records the file's
    absolute path as its locator; any other source (the HTTP registry's ``inline`` rows)
    records ``data_locator`` instead, since its file is only a staging copy."""
    directory, archive = plan_targets(name, output)
    loaded = source.load()
    snapshot, trl, adapter = loaded.snapshot, loaded.trl, loaded.adapter
    path = os.path.abspath(os.fspath(dataset))
    ingestion = ingest_sft_file(
        path,
        policy=invalid_row_policy,
        check=token_checker(trl.decode("utf-8"), snapshot.tokenizer),
        source=data_source,
        source_locator=path if data_source == "dataset_path" else data_locator,
    )
    receipt = ingestion.receipt
    files = loaded.files()
    files["train.jsonl"] = ingestion.dataset
    files["sft_ingestion.json"] = document_bytes(receipt)

    def build(ids: dict[str, FileIdentity]) -> ExportManifest:
        data: dict[str, Any] = {
            "source_name": receipt.source,
            "format": "sft_messages_jsonl",
            "row_count": receipt.rows_kept,
            "ordered_corpus_sha256": receipt.kept_corpus_sha256,
            "dataset": ids["train.jsonl"],
            "sft_selection": {
                "invalid_row_policy": receipt.invalid_row_policy,
                "label_policy": "assistant_only_generation_spans",
                "rows_read": receipt.rows_read,
                "rows_kept": receipt.rows_kept,
                "rows_rejected": receipt.rows_rejected,
                "kept_corpus_sha256": receipt.kept_corpus_sha256,
                "ingestion_receipt": ids["sft_ingestion.json"],
            },
        }
        return _create(_manifest_fields("sft", snapshot, ids, data, adapter))

    return _write(directory, archive, files, build)


def export_grpo(
    source: ExportSource,
    *,
    dataset: str | os.PathLike[str],
    name: str,
    output: str | os.PathLike[str],
    source_name: str = "dataset_path",
) -> ExportOutcome:
    """Export a recorded-GRPO bundle from a canonical compact final-LF groups JSONL file.

    The file is never normalized: a row that is not byte-identical to its canonical
    serialization fails. Corpus rules (width, behaviour policy, identities against the
    exported model) are checked on the source before anything is written and again on
    the staged copy.
    """
    directory, archive = plan_targets(name, output)
    loaded = source.load()
    snapshot, adapter = loaded.snapshot, loaded.adapter
    corpus = Path(os.path.abspath(os.fspath(dataset)))
    binding = GrpoBinding(
        served_model_id=snapshot.served_model_id,
        base_model_sha256=snapshot.shards.aggregate_sha256,
        tokenizer={
            "vocab_sha256": str(snapshot.vocab_sha256),
            "config_sha256": str(sha256_bytes(snapshot.tokenizer)),
            "chat_template_sha256": str(sha256_bytes(snapshot.chat_template)),
        },
        adapter=None if adapter is None else adapter.behaviour_identity(),
    )
    rerender = TokenRerender(snapshot.tokenizer, snapshot.chat_template)
    scan = scan_grpo_corpus(corpus, binding, rerender=rerender)  # before anything is written
    files = loaded.files()
    files["train.jsonl"] = corpus

    def build(ids: dict[str, FileIdentity]) -> ExportManifest:
        data: dict[str, Any] = {
            "source_name": source_name,
            "format": "grpo_groups_jsonl",
            "row_count": scan.row_count,
            "ordered_corpus_sha256": str(scan.ordered_corpus_sha256),
            "dataset": ids["train.jsonl"],
            "rollout_provenance_schema": "kiln.rollout-provenance.v1",
        }
        return _create(_manifest_fields("grpo", snapshot, ids, data, adapter))

    return _write(directory, archive, files, build)
