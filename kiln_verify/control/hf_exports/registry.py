"""Reading and removing published exports: list, detail, download preparation, delete.

Blocking, called from worker threads. The list reads each manifest's self-verifying record
only (its artifacts are not rehashed, so listing 256 large exports stays cheap); the
detail and the download run the complete pristine verifier first
(:func:`~kiln_verify.hf.verify.verify_hf_bundle`): a damaged export is never described
as intact and never served. Deletion renames the export to a private
``.deleting-NAME-<hex>`` name (one atomic step: from then on the name is free), syncs the
registry, removes the tree and syncs again. With an expected identity (``If-Match``) a
different identity is refused (412) and an unreadable one fails (500, as in Kiln); without
one, only the registry entry's shape is checked, so a damaged export stays removable.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kiln_verify.control.hf_exports import store
from kiln_verify.control.hf_exports.create import read_summary
from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.publish import fsync_dir
from kiln_verify.errors import (
    ApiHfTrlExportFailed,
    ApiHfTrlExportPrecondition,
    KilnError,
    snippet,
)
from kiln_verify.hf.bundle_files import EXPORT_MANIFEST, read_bundle_file
from kiln_verify.hf.manifest.http_exports import ExportDetail, ExportList, ExportSummary
from kiln_verify.limits import MAX_MANIFEST_BYTES

__all__ = ["delete_export", "export_detail", "list_exports", "verified_export"]


def list_exports(root: Path) -> ExportList:
    """Every published export's summary, sorted by name; a damaged one fails the list."""
    summaries: list[ExportSummary] = []
    for name in store.scan(root).published:
        directory = store.bundle_dir(root, name)
        try:
            summaries.append(read_summary(directory, name))
        except KilnError as exc:
            if not os.path.isdir(directory):
                continue  # deleted while we listed
            raise ApiHfTrlExportFailed(
                f"export {name} is damaged ({exc.code}: {exc.rule})",
                hint=f"remove it with an unconditioned DELETE /v1/train/hf/exports/{name}",
            ) from None
    return ExportList(data=summaries)


def verified_export(root: Path, name: str) -> tuple[Path, ExportSummary]:
    """The export's directory and summary after the complete pristine verification."""
    from kiln_verify.hf.verify import verify_hf_bundle

    directory = store.target(root, name)
    try:
        report = verify_hf_bundle(directory)
        summary = read_summary(directory, name)
    except KilnError as exc:
        raise ApiHfTrlExportFailed(
            f"export {name} does not verify ({exc.code}: {exc.rule})",
            hint=f"remove it with an unconditioned DELETE /v1/train/hf/exports/{name}",
        ) from None
    if report.export_sha256 != summary.export_sha256:
        raise ApiHfTrlExportFailed(f"export {name} changed while it was verified")
    return directory, summary


def export_detail(root: Path, name: str) -> ExportDetail:
    directory, summary = verified_export(root, name)
    data = read_bundle_file(str(directory), EXPORT_MANIFEST, MAX_MANIFEST_BYTES)
    manifest: dict[str, Any] = loads_object(data, max_bytes=MAX_MANIFEST_BYTES)
    if manifest.get("export_sha256") != summary.export_sha256:
        raise ApiHfTrlExportFailed(f"export {name} changed while it was read")
    return ExportDetail(summary=summary, manifest=manifest)


def delete_export(root: Path, name: str, expected: str | None) -> None:
    """Remove ``name``; with ``expected``, only if that is its identity (else 412)."""
    directory = store.target(root, name)
    if expected is not None:
        try:
            found = read_summary(directory, name).export_sha256
        except KilnError as exc:  # Kiln's answer: a server error, not a precondition
            raise ApiHfTrlExportFailed(
                f"export {name}'s identity cannot be read ({exc.code}: {exc.rule})",
                hint="inspect it, then delete it without If-Match",
            ) from None
        if found != expected:
            raise ApiHfTrlExportPrecondition(
                f"export {name} is {found}, not {snippet(expected)}; it was not deleted"
            )
    try:
        doomed = store.fresh_path(root, store.DELETING_PREFIX, name)
        os.rename(directory, doomed)
        fsync_dir(root)
        store.remove_tree(root, doomed.name)
    except OSError as exc:
        raise ApiHfTrlExportFailed(f"deleting export {name} failed: {exc.strerror}") from None
