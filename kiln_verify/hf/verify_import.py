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
check against it (``adapter_unloadable``), exactly as ``hf import-peft`` requires. An
installed directory holds no TRL template, so its resident identity uses the template
derived from the resident inference template; an export made with a custom
``--training-template`` therefore fails closed there (verify its envelope instead).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kiln_verify.errors import UsageError
from kiln_verify.hf.adapter_check import check_adapter
from kiln_verify.hf.envelope import (
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
from kiln_verify.hf.verify import EXPORT_MANIFEST, read_bundle_file
from kiln_verify.limits import MAX_CHAT_TEMPLATE_BYTES, MAX_MANIFEST_BYTES

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


def _envelope(
    root: str, model: str | os.PathLike[str] | None, served_model_id: str | None
) -> dict[str, Any]:
    report: EnvelopeReport = verify_envelope(root)
    if model is not None:
        template = read_bundle_file(root, "training_chat_template.jinja", MAX_CHAT_TEMPLATE_BYTES)
        _against_model(root, report.export, template, model, served_model_id)
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
            return _envelope(extracted, model, served_model_id)
    if os.path.basename(os.path.normpath(shown)).endswith(ENVELOPE_SUFFIX):
        return _envelope(shown, model, served_model_id)
    installed = verify_installed(shown, name=name)
    if model is not None:
        export = read_export(
            read_bundle_file(shown, EXPORT_MANIFEST, MAX_MANIFEST_BYTES),
            source=os.path.join(shown, EXPORT_MANIFEST),
        )
        _against_model(shown, export, b"", model, served_model_id)
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
