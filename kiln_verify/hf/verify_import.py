"""``kiln-verify hf verify-import PATH``: check an import envelope or an installed adapter.

An operator receiving ``NAME.kiln-hf-import.tar.gz`` (or holding ``REGISTRY/NAME/``) needs
to know, without importing again, that it is intact and, optionally, that it fits a given
resident model. ``PATH`` is one of:

- ``NAME.kiln-hf-import.tar.gz``: extracted under the import archive limits into a private
  temporary directory beside it and verified as an envelope (:func:`extracted_envelope`);
- a ``NAME.kiln-hf-import`` directory: verified as an envelope (:func:`verify_envelope`);
- any other directory: verified as an installed adapter (:func:`verify_installed`; its
  ``kiln_hf_import.json`` must name ``--name``, default the directory's own name).

With ``model``, the resident identity recomputed from that directory must equal the
export's (``resident_identity_mismatch``) and the adapter must pass the structural PEFT
check against it (``adapter_unloadable``), exactly as ``hf import-peft`` requires; for a
directory, those checks read a private verified copy, never the operator's files again. An
installed directory holds no TRL template, so its resident identity uses the template
derived from the resident inference template; an export made with a custom
``--training-template`` therefore fails closed there (verify its envelope instead).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kiln_verify.core.publish import staged_directory
from kiln_verify.errors import HfIdentityMismatch, UsageError
from kiln_verify.hf.adapter_check import check_adapter
from kiln_verify.hf.bundle_files import EXPORT_MANIFEST, read_bundle_file, read_identified
from kiln_verify.hf.envelope import (
    ENVELOPE_FILES,
    ENVELOPE_SUFFIX,
    EnvelopeReport,
    extracted_envelope,
    verify_envelope,
)
from kiln_verify.hf.importer import (
    INSTALLED_FILES,
    require_resident,
    resident_identity,
    verify_installed,
)
from kiln_verify.hf.manifest import ExportManifest
from kiln_verify.hf.manifest.read import read_export
from kiln_verify.limits import (
    MAX_CHAT_TEMPLATE_BYTES,
    MAX_IMPORT_EXPANDED_BYTES,
    MAX_MANIFEST_BYTES,
)

__all__ = ["verify_import_path"]


def _against_model(
    root: str,
    export: ExportManifest,
    trl_template: bytes,
    model: str | os.PathLike[str],
    served_model_id: str | None,
) -> None:
    resident = resident_identity(
        model, exported_trl_template=trl_template, served_model_id=served_model_id
    )
    require_resident(resident, export, os.fspath(model))
    check_adapter(root, model)


@contextmanager
def _private_copy(source: str, files: Iterable[str]) -> Iterator[str]:
    """``files`` of ``source`` copied into a private directory (each read through one
    descriptor). The checks against the resident model read the adapter and the templates
    again; run on this copy, after it is verified again, they read the very bytes the
    verification hashed, never a file swapped in the operator's directory (issue 14.6)."""
    with tempfile.TemporaryDirectory(prefix=".kiln-hf-verify-") as scratch:
        os.chmod(scratch, 0o700)
        target = Path(scratch, "copy")
        with staged_directory(target, dir_mode=0o700, file_mode=0o600) as stage:
            for relative in files:
                stage.copy_file(
                    relative, Path(source, relative), max_bytes=MAX_IMPORT_EXPANDED_BYTES
                )
        yield str(target)


def _changed(shown: str) -> HfIdentityMismatch:
    return HfIdentityMismatch("the directory changed while it was being verified", path=shown)


def _envelope(
    root: str,
    model: str | os.PathLike[str] | None,
    served_model_id: str | None,
    *,
    private: bool,
) -> dict[str, Any]:
    """``private``: ``root`` is our own extraction; else the model checks run on a copy."""
    report: EnvelopeReport = verify_envelope(root)
    if model is not None:
        with contextlib.ExitStack() as stack:
            checked, again = root, report
            if not private:
                checked = stack.enter_context(_private_copy(root, ENVELOPE_FILES))
                again = verify_envelope(checked)
                if (again.export.export_sha256, again.result.result_sha256) != (
                    report.export.export_sha256,
                    report.result.result_sha256,
                ):
                    raise _changed(root)
            template = read_identified(
                checked, again.export.model.trl_training_chat_template, MAX_CHAT_TEMPLATE_BYTES
            )
            _against_model(checked, again.export, template, model, served_model_id)
    return {**report.to_json(), "resident_model_checked": model is not None}


def verify_import_path(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    model: str | os.PathLike[str] | None = None,
    served_model_id: str | None = None,
) -> dict[str, Any]:
    """Verify an envelope archive, an envelope directory or an installed adapter; the report."""
    shown = os.fspath(path)
    if not os.path.exists(shown):
        raise UsageError("no such file or directory", path=shown)
    if not os.path.isdir(shown):
        with extracted_envelope(shown) as extracted:
            return _envelope(extracted, model, served_model_id, private=True)
    if os.path.basename(os.path.normpath(shown)).endswith(ENVELOPE_SUFFIX):
        return _envelope(shown, model, served_model_id, private=False)
    installed = verify_installed(shown, name=name)
    if model is not None:
        with _private_copy(shown, INSTALLED_FILES) as checked:
            again = verify_installed(checked, name=installed.receipt.adapter_name)
            if again.receipt != installed.receipt:
                raise _changed(shown)
            export = read_export(
                read_bundle_file(checked, EXPORT_MANIFEST, MAX_MANIFEST_BYTES),
                source=os.path.join(shown, EXPORT_MANIFEST),
            )
            _against_model(checked, export, b"", model, served_model_id)
    receipt = installed.receipt
    return {
        "status": "verified",
        "kind": "installed_adapter",
        "adapter_name": receipt.adapter_name,
        "directory": str(Path(shown)),
        "task": receipt.task,
        "export_sha256": receipt.export_sha256,
        "result_sha256": receipt.result_sha256,
        "import_sha256": receipt.import_sha256,
        "content_revision": installed.content_revision,
        "used_exported_reference_script": receipt.used_exported_reference_script,
        "installed_bytes": installed.installed_bytes,
        "files": len(INSTALLED_FILES),
        "resident_model_checked": model is not None,
    }
