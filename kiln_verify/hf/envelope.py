"""The ten-file import envelope ``NAME.kiln-hf-import/`` (kiln-hf-trl-contract §5.3, §5.8).

An envelope carries what an import needs from a completed bundle and nothing of the
corpus: both manifests, the executed script, the PEFT configuration and weights, and the
five exported model-side files. Dataset, ingestion receipt, split, input adapter, lock and
reference runner stay behind; the export manifest still binds them by digest.

:func:`verify_envelope` checks the exact file set, the import size limits, both
self-digests, the result-to-export link, the export's five model-file identities and the
result's three file identities. :func:`materialized_envelope` builds one from a completed
bundle (verified first) in a private staging directory and verifies the copy;
:func:`write_envelope_archive` turns it into a deterministic ``NAME.kiln-hf-import.tar.gz``
(sorted USTAR entries, mtime 0, uid/gid 0, fixed modes, single root) published no-clobber
and verified again by extracting it under the import archive limits.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kiln_verify.core.digest import verify
from kiln_verify.core.publish import staged_directory
from kiln_verify.core.safe_tar import ArchiveLimits, extracted_tar_gz, write_tar_gz
from kiln_verify.errors import (
    HfBundleExtraFile,
    HfBundleMissingFile,
    HfIdentityMismatch,
    LimitExceeded,
    TargetExists,
    UsageError,
)
from kiln_verify.hf.archive_rules import DeclaredMembers, Side
from kiln_verify.hf.bundle_files import (
    EXPORT_MANIFEST,
    RESULT_MANIFEST,
    bundle_files,
    read_bundle_file,
    read_paired_result,
)
from kiln_verify.hf.digests import ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE
from kiln_verify.hf.manifest import ExportManifest, FileIdentity, TrainingResult
from kiln_verify.hf.manifest.read import read_export, read_result
from kiln_verify.hf.verify import HfBundleReport, verify_hf_bundle
from kiln_verify.limits import (
    MAX_ADAPTER_CONFIG_BYTES,
    MAX_IMPORT_ARTIFACT_BYTES,
    MAX_IMPORT_COMPRESSED_BYTES,
    MAX_IMPORT_ENTRIES,
    MAX_IMPORT_EXPANDED_BYTES,
    MAX_IMPORT_MANIFEST_BYTES,
    MAX_IMPORT_SCRIPT_BYTES,
    MAX_MANIFEST_BYTES,
)

__all__ = [
    "ENVELOPE_ARCHIVE_SUFFIX",
    "ENVELOPE_FILES",
    "ENVELOPE_SUFFIX",
    "IMPORT_ARCHIVE_LIMITS",
    "IMPORT_NAME_PATTERN",
    "EnvelopeOutcome",
    "EnvelopeReport",
    "check_import_name",
    "check_import_sizes",
    "envelope_rules",
    "extracted_envelope",
    "materialized_envelope",
    "verify_envelope",
    "verify_envelope_archive",
    "write_envelope_archive",
]

ENVELOPE_SUFFIX: Final = ".kiln-hf-import"
ENVELOPE_ARCHIVE_SUFFIX: Final = ".kiln-hf-import.tar.gz"
EXECUTED_SCRIPT: Final = "executed_train.py"
MODEL_FILES: Final = (
    "kiln_model_config.json",
    "tokenizer.json",
    "chat_template.jinja",
    "kiln_training_chat_template.jinja",
    "training_chat_template.jinja",
)
ENVELOPE_FILES: Final = (
    EXPORT_MANIFEST,
    RESULT_MANIFEST,
    *MODEL_FILES,
    EXECUTED_SCRIPT,
    ADAPTER_CONFIG_FILE,
    ADAPTER_WEIGHTS_FILE,
)
"""The exact ten files of an import envelope (§5.3)."""

IMPORT_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""Adapter names (§7): 1..128 ASCII, first alphanumeric, then alphanumerics, ``.``, ``_``,
``-``; ``..`` is refused separately."""

IMPORT_ARCHIVE_LIMITS: Final = ArchiveLimits(
    max_entries=MAX_IMPORT_ENTRIES,
    max_expanded_bytes=MAX_IMPORT_EXPANDED_BYTES,
    max_member_bytes=MAX_IMPORT_EXPANDED_BYTES,
    max_compressed_bytes=MAX_IMPORT_COMPRESSED_BYTES,
)
"""Extraction budgets of an import envelope archive (Kiln's server import rules, §5.8)."""

_CAPS: Final[Mapping[str, tuple[str, int]]] = {
    EXPORT_MANIFEST: ("MAX_IMPORT_MANIFEST_BYTES", MAX_IMPORT_MANIFEST_BYTES),
    RESULT_MANIFEST: ("MAX_IMPORT_MANIFEST_BYTES", MAX_IMPORT_MANIFEST_BYTES),
    EXECUTED_SCRIPT: ("MAX_IMPORT_SCRIPT_BYTES", MAX_IMPORT_SCRIPT_BYTES),
    ADAPTER_CONFIG_FILE: ("MAX_ADAPTER_CONFIG_BYTES", MAX_ADAPTER_CONFIG_BYTES),
    ADAPTER_WEIGHTS_FILE: ("MAX_IMPORT_EXPANDED_BYTES", MAX_IMPORT_EXPANDED_BYTES),
}


def check_import_name(name: str) -> str:
    """Return ``name`` if it is a valid adapter name, else ``usage`` (exit 2)."""
    if not isinstance(name, str) or not IMPORT_NAME_PATTERN.fullmatch(name) or ".." in name:
        raise UsageError(
            "--name must be 1..128 ASCII characters: a letter or digit, then letters, "
            "digits, '.', '_' or '-', with no '..'"
        )
    return name


def check_import_sizes(sizes: Mapping[str, int], *, root: str | None = None) -> int:
    """Apply the import size limits to ``{envelope file: size}``; return the total."""
    total = 0
    for name, size in sorted(sizes.items()):
        limit, bound = _CAPS.get(name, ("MAX_IMPORT_ARTIFACT_BYTES", MAX_IMPORT_ARTIFACT_BYTES))
        if size > bound:
            raise LimitExceeded(
                f"import file {name}",
                limit=limit,
                bound=bound,
                observed=size,
                path=os.path.join(root, name) if root is not None else None,
            )
        total += size
    if total > MAX_IMPORT_EXPANDED_BYTES:
        raise LimitExceeded(
            "the import envelope's files together",
            limit="MAX_IMPORT_EXPANDED_BYTES",
            bound=MAX_IMPORT_EXPANDED_BYTES,
            observed=total,
            path=root,
        )
    return total


@dataclass(frozen=True)
class EnvelopeReport:
    """What a successful envelope verification established."""

    export: ExportManifest
    result: TrainingResult
    total_bytes: int

    @property
    def used_exported_reference_script(self) -> bool:
        return self.result.trainer.script.sha256 == self.export.reference_script.sha256

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "verified",
            "kind": "import_envelope",
            "task": self.export.task,
            "export_sha256": self.export.export_sha256,
            "result_sha256": self.result.result_sha256,
            "used_exported_reference_script": self.used_exported_reference_script,
            "files": len(ENVELOPE_FILES),
            "total_bytes": self.total_bytes,
        }


def _identities(export: ExportManifest, result: TrainingResult) -> list[FileIdentity]:
    model = export.model
    return [
        model.config_file,
        model.tokenizer,
        model.chat_template,
        model.native_training_chat_template,
        model.trl_training_chat_template,
        result.trainer.script,
        result.output_adapter.config,
        result.output_adapter.model,
    ]


def verify_envelope(root: str | os.PathLike[str]) -> EnvelopeReport:
    """Verify an envelope directory: exact ten files, sizes, digests, links, identities."""
    shown = os.fspath(root)
    if not os.path.isdir(shown):
        raise UsageError("the envelope path is not a directory", path=shown)
    found = bundle_files(shown)
    missing = sorted(set(ENVELOPE_FILES) - found)
    if missing:
        raise HfBundleMissingFile(
            f"envelope file {missing[0]} is missing ({len(missing)} missing)",
            path=os.path.join(shown, missing[0]),
        )
    extra = sorted(found - set(ENVELOPE_FILES))
    if extra:
        raise HfBundleExtraFile(
            f"{extra[0]} is not one of the ten import envelope files ({len(extra)} extra)",
            path=os.path.join(shown, extra[0]),
        )
    total = check_import_sizes(
        {name: os.lstat(os.path.join(shown, name)).st_size for name in ENVELOPE_FILES},
        root=shown,
    )
    export = read_export(
        read_bundle_file(shown, EXPORT_MANIFEST, MAX_MANIFEST_BYTES),
        source=os.path.join(shown, EXPORT_MANIFEST),
    )
    result = read_paired_result(shown, export, holder="envelope")
    for identity in _identities(export, result):
        verify(shown, identity.to_artifact())
    return EnvelopeReport(export, result, total)


@contextmanager
def materialized_envelope(
    bundle: str | os.PathLike[str],
    name: str,
    scratch_parent: str | os.PathLike[str],
    *,
    scratch_prefix: str = ".kiln-hf-envelope-",
) -> Iterator[tuple[Path, EnvelopeReport, HfBundleReport]]:
    """Verify the completed ``bundle``, copy the ten files into a private staging
    directory ``<scratch>/NAME.kiln-hf-import`` and verify that copy.

    Yields (envelope directory, envelope report, bundle report); the private scratch
    directory (inside ``scratch_parent``) is removed when the block exits, however it exits.
    The bundle itself is only read.
    """
    check_import_name(name)
    source = os.fspath(bundle)
    bundle_report = verify_hf_bundle(source, completed=True)
    with tempfile.TemporaryDirectory(prefix=scratch_prefix, dir=scratch_parent) as scratch:
        os.chmod(scratch, 0o700)
        target = Path(scratch, name + ENVELOPE_SUFFIX)
        with staged_directory(target, dir_mode=0o700, file_mode=0o600) as stage:
            for relative in ENVELOPE_FILES:
                limit = _CAPS.get(relative, ("", MAX_IMPORT_ARTIFACT_BYTES))[1]
                stage.copy_file(relative, Path(source, relative), max_bytes=limit)
            staged = verify_envelope(stage.path)
        report = verify_envelope(target)
        if (
            staged.export.export_sha256 != bundle_report.export_sha256
            or report.result.result_sha256 != bundle_report.result_sha256
        ):
            raise HfIdentityMismatch(
                "the envelope does not hold the verified bundle's manifests", path=source
            )
        yield target, report, bundle_report


@dataclass(frozen=True)
class EnvelopeOutcome:
    archive: Path
    report: EnvelopeReport

    def to_json(self) -> dict[str, Any]:
        return {"archive": str(self.archive), **self.report.to_json()}


def envelope_root(archive: str | os.PathLike[str]) -> str:
    """``NAME.kiln-hf-import`` for ``.../NAME.kiln-hf-import.tar.gz``."""
    base = os.path.basename(os.fspath(archive))
    if not base.endswith(ENVELOPE_ARCHIVE_SUFFIX) or base == ENVELOPE_ARCHIVE_SUFFIX:
        raise UsageError(
            f"an envelope archive must be named NAME{ENVELOPE_ARCHIVE_SUFFIX}",
            path=os.fspath(archive),
        )
    return base.removesuffix(".tar.gz")


def _declare_model_files(data: bytes) -> dict[str, int]:
    model = read_export(data).model
    identities = (
        model.config_file,
        model.tokenizer,
        model.chat_template,
        model.native_training_chat_template,
        model.trl_training_chat_template,
    )
    return {ident.relative_path: ident.size_bytes for ident in identities}


def _declare_trained_files(data: bytes) -> dict[str, int]:
    result = read_result(data)
    identities = (result.trainer.script, result.output_adapter.config, result.output_adapter.model)
    return {ident.relative_path: ident.size_bytes for ident in identities}


def envelope_rules() -> DeclaredMembers:
    """What a ``NAME.kiln-hf-import.tar.gz`` may hold, checked at each member's header
    (:mod:`kiln_verify.hf.archive_rules`): the ten files, each within its import cap and,
    once its manifest is read, exactly as large as declared."""
    caps = {
        name: _CAPS.get(name, ("MAX_IMPORT_ARTIFACT_BYTES", MAX_IMPORT_ARTIFACT_BYTES))
        for name in ENVELOPE_FILES
    }
    model_side = frozenset({EXPORT_MANIFEST, *MODEL_FILES})
    trained_side = frozenset(ENVELOPE_FILES) - model_side
    return DeclaredMembers(
        (
            Side(EXPORT_MANIFEST, model_side, _declare_model_files),
            Side(RESULT_MANIFEST, trained_side, _declare_trained_files),
        ),
        caps=caps,
        what="an import envelope",
    )


@contextmanager
def extracted_envelope(archive: str | os.PathLike[str]) -> Iterator[str]:
    """The root of an envelope archive extracted under the import limits and
    :func:`envelope_rules` into a private directory beside it; removed on exit."""
    root = envelope_root(archive)
    check_import_name(root.removesuffix(ENVELOPE_SUFFIX))
    parent = os.path.dirname(os.path.abspath(os.fspath(archive)))
    with (
        tempfile.TemporaryDirectory(prefix=".kiln-hf-envelope-verify-", dir=parent) as scratch,
        extracted_tar_gz(
            archive,
            scratch,
            expected_root=root,
            limits=IMPORT_ARCHIVE_LIMITS,
            rules=envelope_rules(),
        ) as extracted,
    ):
        yield os.fspath(extracted)


def verify_envelope_archive(archive: str | os.PathLike[str]) -> EnvelopeReport:
    """Extract an envelope archive under the import limits, privately, and verify it."""
    with extracted_envelope(archive) as root:
        return verify_envelope(root)


def write_envelope_archive(
    bundle: str | os.PathLike[str], name: str, output: str | os.PathLike[str] | None = None
) -> EnvelopeOutcome:
    """Write the deterministic ``NAME.kiln-hf-import.tar.gz`` of a completed bundle."""
    check_import_name(name)
    archive = Path(output) if output is not None else Path(name + ENVELOPE_ARCHIVE_SUFFIX)
    if archive.name != name + ENVELOPE_ARCHIVE_SUFFIX:
        raise UsageError(
            f"--output must be named {name}{ENVELOPE_ARCHIVE_SUFFIX}", path=str(archive)
        )
    parent = archive.parent
    if not parent.is_dir():
        raise UsageError("the output directory does not exist", path=str(parent))
    if os.path.lexists(archive):
        raise TargetExists(
            "the envelope archive already exists and is never replaced", path=str(archive)
        )
    with materialized_envelope(bundle, name, parent) as (directory, report, _):
        write_tar_gz(directory, archive, root_name=directory.name, limits=IMPORT_ARCHIVE_LIMITS)
    try:
        archived = verify_envelope_archive(archive)
        if archived.result.result_sha256 != report.result.result_sha256:
            raise HfIdentityMismatch(
                "the archive does not hold the verified envelope", path=str(archive)
            )
    except BaseException:
        archive.unlink()  # ours, created new a moment ago: leave nothing unverified
        raise
    return EnvelopeOutcome(archive, archived)
