"""Verification of HF/TRL bundles: archives, pristine exports and completed results.

Every name here says ``hf`` (``verify_hf_path``, ``verify_hf_bundle``, ``verify_hf_archive``,
:class:`HfBundleReport`): the OpenEnv bundle's verifier is
:func:`kiln_verify.openenv.verify.verify_bundle`.

``verify_hf_path`` accepts a ``NAME.kiln-hf.tar.gz`` (extracted with every hostile-archive
rule of :mod:`kiln_verify.core.safe_tar` into a private temporary directory, expected
root ``NAME.kiln-hf``), a pristine bundle directory or, with ``completed=True``, a
completed one. It checks, in order:

1. the exact recursive file set: every declared file present (``hf_bundle_missing_file``),
   nothing else (``hf_bundle_extra_file``); links and special files refused;
2. the export manifest: version, shape, cross-record rules, self-digest; for a completed
   bundle also the result manifest and its link to the export (``hf_identity_mismatch``);
3. every artifact's size and SHA-256 (``size_mismatch`` / ``digest_mismatch``); for a
   completed bundle also the output adapter's structure against the exported model config
   (:func:`~kiln_verify.hf.adapter_check.check_exported_adapter`, ``adapter_unloadable``),
   the check ``hf import-peft`` applies, without reading weights;
4. the data: SFT ingestion receipt against the selection, every ``train.jsonl`` row
   canonical and hashing to its receipt entry, the TRL template's generation blocks; GRPO
   corpus rows canonical, one width, one behaviour policy, identities equal to the export's
   model, ordered corpus digest and row count (:func:`~kiln_verify.hf.grpo_scan.
   scan_grpo_corpus`).

This module is the order of those checks. Reading a bundle's files is
:mod:`kiln_verify.hf.bundle_files` (shared with the exporter, the import envelope and the
importer), the GRPO corpus scan is :mod:`kiln_verify.hf.grpo_scan`.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kiln_verify.core.digest import verify
from kiln_verify.core.jsonio import loads
from kiln_verify.core.safe_tar import extracted_tar_gz
from kiln_verify.errors import (
    HfBundleExtraFile,
    HfBundleMissingFile,
    HfIdentityMismatch,
    HfTrainingTemplateUnderivable,
    KilnError,
    RecordInvalid,
    UsageError,
)
from kiln_verify.hf.adapter_check import check_exported_adapter
from kiln_verify.hf.archive_rules import DeclaredMembers, Side
from kiln_verify.hf.bundle_files import (
    EXPORT_FILES,
    EXPORT_MANIFEST,
    RESULT_FILES,
    RESULT_MANIFEST,
    bundle_files,
    bundle_name,
    export_identities,
    identified_lines,
    read_bundle_file,
    read_identified,
    read_paired_result,
    result_identities,
)
from kiln_verify.hf.digests import sft_parsed_row_digest
from kiln_verify.hf.export.sft import SftExample, sft_row_bytes
from kiln_verify.hf.export.template import has_generation_blocks
from kiln_verify.hf.grpo_scan import GrpoBinding, scan_grpo_corpus
from kiln_verify.hf.manifest import (
    ExportManifest,
    TrainingResult,
    read_export,
    read_result,
    read_sft_ingestion,
)
from kiln_verify.hf.rerender import TokenRerender
from kiln_verify.hf.runner import reference_script
from kiln_verify.limits import (
    MAX_CHAT_TEMPLATE_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_SFT_RECEIPT_BYTES,
    MAX_SFT_ROW_BYTES,
    MAX_TOKENIZER_BYTES,
)
from kiln_verify.records import validate_record

__all__ = [
    "HfBundleReport",
    "bundle_rules",
    "verify_hf_archive",
    "verify_hf_bundle",
    "verify_hf_path",
]


@dataclass(frozen=True)
class HfBundleReport:
    """What a successful verification established."""

    kind: Literal["pristine", "completed"]
    task: str
    export_sha256: str
    rows: int
    files: int
    reference_script_match: bool
    """The bundle's ``train.py`` is this kiln-verify's embedded reference runner."""
    result_sha256: str | None = None
    used_exported_reference_script: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": "verified",
            "kind": self.kind,
            "task": self.task,
            "export_sha256": self.export_sha256,
            "rows": self.rows,
            "files": self.files,
            "reference_script_match": self.reference_script_match,
        }
        if self.result_sha256 is not None:
            out["result_sha256"] = self.result_sha256
            out["used_exported_reference_script"] = self.used_exported_reference_script
        return out


def _check_file_set(root: str, found: set[str], declared: set[str], *, completed: bool) -> None:
    missing = sorted(declared - found)
    if missing:
        untrained = completed and RESULT_MANIFEST in missing
        raise HfBundleMissingFile(
            f"declared file {missing[0]} is missing ({len(missing)} missing)",
            path=os.path.join(root, missing[0]),
            hint=(
                f"this bundle has not been trained yet: run its train.py first "
                f"(python -I {os.path.join(root, 'train.py')} {root} --base-model MODEL)"
                if untrained
                else None
            ),
        )
    extra = sorted(found - declared)
    if extra:
        hint = None
        if not completed and RESULT_MANIFEST in extra:
            hint = "this is a completed bundle; verify it with --completed"
        raise HfBundleExtraFile(
            f"{extra[0]} is not declared by the bundle's manifests ({len(extra)} extra)",
            path=os.path.join(root, extra[0]),
            hint=hint,
        )


def verify_hf_bundle(root: str | os.PathLike[str], *, completed: bool = False) -> HfBundleReport:
    """Verify a bundle directory (pristine, or completed with ``completed=True``)."""
    shown = os.fspath(root)
    if not os.path.isdir(shown):
        raise UsageError("the bundle path is not a directory", path=shown)
    found = bundle_files(shown)
    required = {EXPORT_MANIFEST} | ({RESULT_MANIFEST} if completed else set())
    _check_file_set(shown, found, required | found, completed=completed)
    export = read_export(
        read_bundle_file(shown, EXPORT_MANIFEST, MAX_MANIFEST_BYTES),
        source=os.path.join(shown, EXPORT_MANIFEST),
    )
    identities = export_identities(export)
    declared = {EXPORT_MANIFEST} | {ident.relative_path for ident in identities}
    result: TrainingResult | None = None
    if completed:
        result = read_paired_result(shown, export, holder="bundle")
        identities += result_identities(result)
        declared |= set(RESULT_FILES)
    if len(declared) != len(identities) + 1 + (1 if completed else 0):
        raise RecordInvalid("two artifact identities name one path", path=shown)
    _check_file_set(shown, found, declared, completed=completed)
    for ident in identities:
        verify(shown, ident.to_artifact())
    if completed:
        check_exported_adapter(shown)  # what import-peft requires of the adapter's structure
    if export.task == "sft":
        _check_sft(shown, export)
    else:
        rerender = TokenRerender(
            read_identified(shown, export.model.tokenizer, MAX_TOKENIZER_BYTES),
            read_identified(shown, export.model.chat_template, MAX_CHAT_TEMPLATE_BYTES),
        )
        scan_grpo_corpus(
            os.path.join(shown, "train.jsonl"),
            GrpoBinding.of(export),
            totals=export,
            rerender=rerender,
        )
    embedded = reference_script()
    return HfBundleReport(
        kind="completed" if completed else "pristine",
        task=export.task,
        export_sha256=export.export_sha256,
        rows=export.data.row_count,
        files=len(declared),
        reference_script_match=export.reference_script.sha256 == embedded.sha256,
        result_sha256=result.result_sha256 if result is not None else None,
        used_exported_reference_script=(
            result.trainer.script.sha256 == export.reference_script.sha256
            if result is not None
            else None
        ),
    )


def _check_sft(root: str, export: ExportManifest) -> None:
    data = export.data
    selection = data.sft_selection
    assert selection is not None  # the manifest model requires it for task sft
    receipt_path = os.path.join(root, "sft_ingestion.json")
    receipt = read_sft_ingestion(
        read_identified(root, selection.ingestion_receipt, MAX_SFT_RECEIPT_BYTES),
        source=receipt_path,
    )
    pairs = (
        ("invalid_row_policy", receipt.invalid_row_policy, selection.invalid_row_policy),
        ("rows_read", receipt.rows_read, selection.rows_read),
        ("rows_kept", receipt.rows_kept, selection.rows_kept),
        ("rows_rejected", receipt.rows_rejected, selection.rows_rejected),
        ("kept_corpus_sha256", receipt.kept_corpus_sha256, selection.kept_corpus_sha256),
        ("source", receipt.source, data.source_name),
    )
    for name, left, right in pairs:
        if left != right:
            raise HfIdentityMismatch(
                f"sft_ingestion.json {name} differs from the export's sft_selection",
                path=receipt_path,
            )
    dataset_path = os.path.join(root, "train.jsonl")
    count = 0
    for number, line in identified_lines(root, data.dataset, MAX_SFT_ROW_BYTES):
        try:
            example = validate_record(SftExample, loads(line[:-1], max_bytes=MAX_SFT_ROW_BYTES))
        except KilnError as exc:
            raise exc.at(path=dataset_path, line=number) from None
        if sft_row_bytes(example) != line:
            raise RecordInvalid(
                "the row is not the compact struct-order JSON of its example",
                path=dataset_path,
                line=number,
            )
        if (
            count >= len(receipt.kept_row_hashes)
            or str(sft_parsed_row_digest(example.to_json())) != receipt.kept_row_hashes[count]
        ):
            raise HfIdentityMismatch(
                "the row does not hash to its kept_row_hashes entry in sft_ingestion.json",
                path=dataset_path,
                line=number,
            )
        count += 1
    if count != data.row_count:
        raise HfIdentityMismatch(
            f"train.jsonl has {count} rows, the export declares {data.row_count}", path=dataset_path
        )
    template = read_identified(
        root, export.model.trl_training_chat_template, MAX_CHAT_TEMPLATE_BYTES
    )
    if not has_generation_blocks(template.decode("utf-8", "replace")):
        raise HfTrainingTemplateUnderivable(
            "training_chat_template.jinja has no {% generation %} ... {% endgeneration %} blocks",
            path=os.path.join(root, "training_chat_template.jinja"),
        )


def _declare_export(data: bytes) -> dict[str, int]:
    return {ident.relative_path: ident.size_bytes for ident in export_identities(read_export(data))}


def _declare_result(data: bytes) -> dict[str, int]:
    result = read_result(data)
    return {ident.relative_path: ident.size_bytes for ident in result_identities(result)}


def bundle_rules(*, completed: bool) -> DeclaredMembers:
    """What a ``NAME.kiln-hf.tar.gz`` may hold, checked at each member's header
    (:mod:`kiln_verify.hf.archive_rules`): the export's files, and with ``completed`` the
    four result files, each as large as its manifest declares."""
    sides = [Side(EXPORT_MANIFEST, EXPORT_FILES, _declare_export)]
    if completed:
        sides.append(Side(RESULT_MANIFEST, frozenset(RESULT_FILES), _declare_result))
    limit = ("MAX_MANIFEST_BYTES", MAX_MANIFEST_BYTES)

    def extra_hint(name: str) -> str | None:
        if not completed and name in RESULT_FILES:
            return "this is a completed bundle; verify it with --completed"
        return None

    def missing_hint(name: str) -> str | None:
        if name == RESULT_MANIFEST:
            return "this bundle has not been trained yet: run its train.py first"
        return None

    return DeclaredMembers(
        tuple(sides),
        caps={EXPORT_MANIFEST: limit, RESULT_MANIFEST: limit},
        what="a completed bundle" if completed else "a pristine bundle",
        extra_hint=extra_hint,
        missing_hint=missing_hint,
    )


def verify_hf_archive(
    archive: str | os.PathLike[str],
    *,
    completed: bool = False,
    scratch_parent: str | os.PathLike[str] | None = None,
) -> HfBundleReport:
    """Extract ``NAME.kiln-hf.tar.gz`` into a private temporary directory (inside
    ``scratch_parent``, default the system's) and verify it.

    Extraction follows :func:`bundle_rules`, so nothing the manifests do not declare, and
    nothing larger than declared, is ever written."""
    root_name = bundle_name(archive)
    with (
        tempfile.TemporaryDirectory(prefix=".kiln-hf-verify-", dir=scratch_parent) as scratch,
        extracted_tar_gz(
            archive, scratch, expected_root=root_name, rules=bundle_rules(completed=completed)
        ) as extracted,
    ):
        return verify_hf_bundle(extracted, completed=completed)


def verify_hf_path(path: str | os.PathLike[str], *, completed: bool = False) -> HfBundleReport:
    """An archive (a file) or a bundle directory."""
    shown = os.fspath(path)
    if os.path.isdir(shown):
        return verify_hf_bundle(shown, completed=completed)
    if not os.path.exists(shown):
        raise UsageError("no such file or directory", path=shown)
    return verify_hf_archive(Path(shown), completed=completed)
