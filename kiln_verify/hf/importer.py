"""Verified PEFT import: a completed bundle into ``REGISTRY/NAME/`` (kiln-hf-trl-contract §5.8).

:func:`import_peft` runs, in order, and publishes nothing unless every step passes:

1. the adapter name (``usage``) and the target ``REGISTRY/NAME`` (``target_exists``);
2. the completed bundle, fully (:func:`kiln_verify.hf.verify.verify_hf_bundle`);
3. the ten-file envelope, copied into a private staging directory ``.hf-peft-import-*``
   inside the registry and verified again (:mod:`kiln_verify.hf.envelope`), with the
   import size limits;
4. the resident identity recomputed from ``--model`` and compared field by field with the
   export's (``resident_identity_mismatch``);
5. the PEFT configuration and safetensors header against the resident model's modules
   (:func:`kiln_verify.hf.adapter_check.check_adapter`, ``adapter_unloadable``);
6. the six installed files (five copied from the envelope plus the sealed receipt
   ``kiln_hf_import.json``) staged, synced, re-read and verified, then published with a
   no-replace rename and verified once more.

The staging directories are removed on success and on every failure; the bundle is never
modified.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kiln_verify.core.digest import Sha256Digest, sha256_bytes, verify
from kiln_verify.core.publish import staged_directory
from kiln_verify.errors import (
    HfBundleExtraFile,
    HfBundleMissingFile,
    HfIdentityMismatch,
    KilnError,
    ResidentIdentityMismatch,
    TargetExists,
    UsageError,
)
from kiln_verify.hf.adapter_check import check_adapter
from kiln_verify.hf.bundle_files import (
    EXPORT_MANIFEST,
    RESULT_MANIFEST,
    bundle_files,
    read_bundle_file,
)
from kiln_verify.hf.digests import (
    ADAPTER_CONFIG_FILE,
    ADAPTER_WEIGHTS_FILE,
    adapter_content_revision,
)
from kiln_verify.hf.envelope import (
    EXECUTED_SCRIPT,
    EnvelopeReport,
    check_import_name,
    check_import_sizes,
    materialized_envelope,
)
from kiln_verify.hf.export.model_dir import ModelSnapshot
from kiln_verify.hf.export.template import (
    check_training_template,
    derive_training_template,
    native_training_template,
)
from kiln_verify.hf.manifest import (
    ExportManifest,
    ImportReceipt,
    ResidentModelIdentity,
    TrainingResult,
    document_bytes,
)
from kiln_verify.hf.manifest.read import read_export, read_import, read_result
from kiln_verify.limits import MAX_IMPORT_EXPANDED_BYTES, MAX_MANIFEST_BYTES

__all__ = [
    "IMPORT_MANIFEST",
    "INSTALLED_FILES",
    "ImportOutcome",
    "InstalledAdapter",
    "import_peft",
    "install_envelope",
    "require_resident",
    "resident_identity",
    "verify_installed",
]

IMPORT_MANIFEST: Final = "kiln_hf_import.json"
_COPIED: Final = (
    ADAPTER_CONFIG_FILE,
    ADAPTER_WEIGHTS_FILE,
    EXECUTED_SCRIPT,
    EXPORT_MANIFEST,
    RESULT_MANIFEST,
)
INSTALLED_FILES: Final = (*_COPIED, IMPORT_MANIFEST)
"""The exact six files of an installed adapter directory (§5.3)."""
STAGING_PREFIX: Final = ".hf-peft-import-"


def _template_text(data: bytes, what: str, model: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ResidentIdentityMismatch(f"the resident {what} is not UTF-8", path=model) from None


def resident_identity(
    model: str | os.PathLike[str],
    *,
    exported_trl_template: bytes,
    served_model_id: str | None = None,
) -> ResidentModelIdentity:
    """Recompute the resident model identity from a local HF model directory.

    Served id, base shards, canonical config, tokenizer vocabulary and bytes and the
    inference template come from ``model`` exactly as the export writer reads them. The
    TRL training template is the one derived from the resident inference template when
    that is the exported one; otherwise the exported template is admitted only if it
    renders every probe exactly like the resident inference template. The native training
    template is always recomputed from the TRL template.
    """
    shown = os.fspath(model)
    snapshot = ModelSnapshot.read(model, served_model_id=served_model_id)
    inference = _template_text(snapshot.chat_template, "chat template", shown)
    trl = _template_text(exported_trl_template, "TRL training template", shown)
    try:
        derived = derive_training_template(inference)
    except KilnError:
        derived = None
    if derived != trl:
        try:
            check_training_template(trl, inference, derived=False)
        except KilnError:
            trl = derived if derived is not None else ""
    return ResidentModelIdentity(
        served_model_id=snapshot.served_model_id,
        base_weight_shard_manifest=snapshot.shards,
        model_config_sha256=str(snapshot.model_config_sha256),
        tokenizer_vocab_sha256=str(snapshot.vocab_sha256),
        tokenizer_config_sha256=str(sha256_bytes(snapshot.tokenizer)),
        chat_template_sha256=str(sha256_bytes(snapshot.chat_template)),
        native_training_chat_template_sha256=str(
            sha256_bytes(native_training_template(trl).encode("utf-8"))
        ),
        trl_training_chat_template_sha256=str(sha256_bytes(trl.encode("utf-8"))),
    )


def require_resident(resident: ResidentModelIdentity, export: ExportManifest, model: str) -> None:
    """The recomputed resident identity equals the export's, field by field."""
    want = ResidentModelIdentity.from_export(export.model).to_json()
    got = resident.to_json()
    for key, value in want.items():
        if got.get(key) != value:
            shown = value if isinstance(value, str) else "the exported value"
            found = got.get(key) if isinstance(got.get(key), str) else "another value"
            hint = None
            if key == "served_model_id":
                hint = (
                    f"the export recorded the served model id {shown!r}; pass "
                    f"--served-model-id {shown} if this directory is that model"
                )
            raise ResidentIdentityMismatch(
                f"resident {key} is {found}, the export was made from {shown}",
                path=model,
                hint=hint,
            )


def _content_revision(result: TrainingResult) -> str:
    adapter = result.output_adapter
    return adapter_content_revision(
        Sha256Digest.parse(adapter.model.sha256),
        adapter.model.size_bytes,
        Sha256Digest.parse(adapter.config.sha256),
    )


@dataclass(frozen=True)
class InstalledAdapter:
    """What :func:`verify_installed` established about ``REGISTRY/NAME/``."""

    receipt: ImportReceipt
    content_revision: str
    installed_bytes: int


def verify_installed(
    directory: str | os.PathLike[str], *, name: str | None = None
) -> InstalledAdapter:
    """Verify an installed adapter directory: exactly six files, three self-digests, the
    result-to-export and receipt links, and the result's three file identities.

    The receipt must name ``name`` (default: the directory's own name)."""
    shown = os.fspath(directory)
    expected_name = name if name is not None else os.path.basename(os.path.normpath(shown))
    found = bundle_files(shown)
    missing = sorted(set(INSTALLED_FILES) - found)
    if missing:
        raise HfBundleMissingFile(
            f"installed file {missing[0]} is missing", path=os.path.join(shown, missing[0])
        )
    extra = sorted(found - set(INSTALLED_FILES))
    if extra:
        raise HfBundleExtraFile(
            f"{extra[0]} is not one of the six installed files",
            path=os.path.join(shown, extra[0]),
        )
    sizes = {name: os.lstat(os.path.join(shown, name)).st_size for name in INSTALLED_FILES}
    check_import_sizes({k: v for k, v in sizes.items() if k != IMPORT_MANIFEST}, root=shown)
    export = read_export(
        read_bundle_file(shown, EXPORT_MANIFEST, MAX_MANIFEST_BYTES),
        source=os.path.join(shown, EXPORT_MANIFEST),
    )
    result = read_result(
        read_bundle_file(shown, RESULT_MANIFEST, MAX_MANIFEST_BYTES),
        source=os.path.join(shown, RESULT_MANIFEST),
    )
    receipt_path = os.path.join(shown, IMPORT_MANIFEST)
    receipt = read_import(
        read_bundle_file(shown, IMPORT_MANIFEST, MAX_MANIFEST_BYTES), source=receipt_path
    )
    if result.export_sha256 != export.export_sha256 or result.task != export.task:
        raise HfIdentityMismatch(
            "the installed result does not belong to the installed export",
            path=os.path.join(shown, RESULT_MANIFEST),
        )
    used = result.trainer.script.sha256 == export.reference_script.sha256
    if (
        not receipt.matches_export(export)
        or receipt.result_sha256 != result.result_sha256
        or receipt.used_exported_reference_script != used
        or receipt.adapter_name != expected_name
    ):
        raise HfIdentityMismatch(
            "kiln_hf_import.json does not bind this directory's name, export and result",
            path=receipt_path,
        )
    for identity in (
        result.trainer.script,
        result.output_adapter.config,
        result.output_adapter.model,
    ):
        verify(shown, identity.to_artifact())
    return InstalledAdapter(receipt, _content_revision(result), sum(sizes.values()))


@dataclass(frozen=True)
class ImportOutcome:
    directory: Path
    installed: InstalledAdapter

    def to_json(self) -> dict[str, Any]:
        receipt = self.installed.receipt
        return {
            "status": "imported",
            "adapter_name": receipt.adapter_name,
            "directory": str(self.directory),
            "task": receipt.task,
            "export_sha256": receipt.export_sha256,
            "result_sha256": receipt.result_sha256,
            "import_sha256": receipt.import_sha256,
            "content_revision": self.installed.content_revision,
            "used_exported_reference_script": receipt.used_exported_reference_script,
            "installed_bytes": self.installed.installed_bytes,
            "files": len(INSTALLED_FILES),
        }


def ensure_registry(registry: str | os.PathLike[str]) -> Path:
    """The registry directory; a missing one is created private (0700) when its parent
    exists, so a first import needs no ``mkdir``. A path that exists and is not a
    directory, or whose parent is missing, is a usage error."""
    registry_dir = Path(registry)
    if registry_dir.is_dir():
        return registry_dir
    if os.path.lexists(registry_dir):
        raise UsageError("the registry path exists and is not a directory", path=str(registry_dir))
    parent = registry_dir.parent
    if not parent.is_dir():
        raise UsageError(
            "the registry's parent directory does not exist",
            path=str(registry_dir),
            hint=f"create {parent} first, or choose a registry inside an existing directory",
        )
    with contextlib.suppress(FileExistsError):  # created meanwhile by a concurrent import
        registry_dir.mkdir(mode=0o700)
    if not registry_dir.is_dir():
        raise UsageError("the registry path is not a directory", path=str(registry_dir))
    return registry_dir


def import_peft(
    *,
    bundle: str | os.PathLike[str],
    name: str,
    model: str | os.PathLike[str],
    registry: str | os.PathLike[str],
    served_model_id: str | None = None,
) -> ImportOutcome:
    """Verify a completed bundle against the resident ``model`` and install its adapter as
    ``registry/name/`` (six files); an existing name is refused and left untouched."""
    check_import_name(name)
    registry_dir = ensure_registry(registry)
    _require_absent(registry_dir / name)
    with materialized_envelope(bundle, name, registry_dir, scratch_prefix=STAGING_PREFIX) as (
        envelope,
        report,
        _,
    ):
        return install_envelope(
            envelope,
            report,
            name=name,
            model=model,
            registry_dir=registry_dir,
            served_model_id=served_model_id,
        )


def _require_absent(target: Path) -> None:
    if os.path.lexists(target):
        raise TargetExists(
            "an adapter with this name is already installed and is never replaced",
            path=str(target),
            hint="choose another --name",
        )


def install_envelope(
    envelope: Path,
    report: EnvelopeReport,
    *,
    name: str,
    model: str | os.PathLike[str],
    registry_dir: Path,
    served_model_id: str | None = None,
    guard: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> ImportOutcome:
    """Steps 4-6 of :func:`import_peft` for an envelope already verified (``report``) in a
    private directory: the resident identity, the structural PEFT check, then the six files
    staged, verified and published as ``registry_dir/name``. ``guard`` is held around the
    staging and publication (the server's adapter barrier); the local import holds none."""
    target = registry_dir / name
    model_shown = os.fspath(model)
    export, result = report.export, report.result
    resident = resident_identity(
        model,
        exported_trl_template=(envelope / "training_chat_template.jinja").read_bytes(),
        served_model_id=served_model_id,
    )
    require_resident(resident, export, model_shown)
    check_adapter(envelope, model)
    receipt = ImportReceipt.create(
        adapter_name=name,
        task=export.task,
        export_sha256=export.export_sha256,
        result_sha256=result.result_sha256,
        resident_model=resident,
        used_exported_reference_script=report.used_exported_reference_script,
    )
    with guard():
        _require_absent(target)
        with staged_directory(target, dir_mode=0o755, file_mode=0o644) as stage:
            for relative in _COPIED:
                stage.copy_file(relative, envelope / relative, max_bytes=MAX_IMPORT_EXPANDED_BYTES)
            stage.write_bytes(IMPORT_MANIFEST, document_bytes(receipt))
            staged = verify_installed(stage.path, name=name)
            if staged.receipt != receipt:
                raise HfIdentityMismatch(
                    "the staged receipt reads back differently", path=stage.path
                )
    installed = verify_installed(target)
    if installed.receipt != receipt:
        raise HfIdentityMismatch("the installed receipt reads back differently", path=str(target))
    return ImportOutcome(target, installed)
