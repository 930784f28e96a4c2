"""``kiln-verify hf export-sft|export-grpo --url``, ``hf list`` and ``hf delete``: the HTTP
half of the export hand-off (docs/hf-http-export.md; kiln-hf-trl-contract §1.3).

An export over HTTP, in order:

1. before any request: the name, the output (must not exist; its directory must), the
   data source (exactly one of ``--file``, a path on the server, and ``--dataset``) and the
   split manifest (a local file holding one JSON object);
2. ``POST`` the request; the answer must be the summary of that name with a strong ETag;
3. download, verify and publish (:func:`~kiln_verify.control_client.hf_export_fetch.
   fetch_export`): nothing is published unless the archive is exactly the created export;
4. unless ``--keep-server-copy``: ``DELETE`` with ``If-Match`` of the created identity, so a
   name reused meanwhile is never deleted. A failure here keeps the verified archive and
   reports ``hf_export_cleanup_failed`` with the exact command that retries it.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Literal

import typer

from kiln_verify.core.jsonio import loads
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import (
    HfExportCleanupFailed,
    KilnError,
    TargetExists,
    UsageError,
    snippet,
)
from kiln_verify.hf.manifest.http_exports import EXPORT_NAME, ExportSummary
from kiln_verify.limits import MAX_SPLIT_MANIFEST_BYTES

__all__ = [
    "EXPORT_URL",
    "KEEP_SERVER_COPY",
    "SERVER_URL",
    "delete_report",
    "http_export_report",
    "list_report",
    "local_only",
]

EXPORT_URL = typer.Option(
    None,
    "--url",
    metavar="URL",
    help=(
        "Export on this kiln-verify/Kiln server instead of locally: create, download, verify, "
        "publish, then delete the server copy (--file and --input-adapter are then server-side)."
    ),
)
SERVER_URL = typer.Option(
    "http://127.0.0.1:8420", "--url", metavar="URL", help="The export server's base URL."
)
KEEP_SERVER_COPY = typer.Option(
    False, "--keep-server-copy", help="With --url: keep the server's export after publication."
)


def local_only(url: str | None, **options: object) -> None:
    """Refuse local-only options next to ``--url`` (usage error before any request)."""
    given = [flag for flag, value in options.items() if value is not None]
    if url is not None and given:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in given)
        raise UsageError(f"{flags} only apply to a local export, not with --url")


def _name(name: str) -> str:
    if not EXPORT_NAME.fullmatch(name):
        raise UsageError(
            "--name must be 1..128 ASCII characters: a letter or digit, then letters, "
            "digits, '_' or '-'"
        )
    return name


def _output(name: str, output: Path | None) -> Path:
    path = output if output is not None else Path(f"{name}.kiln-hf.tar.gz")
    if os.path.lexists(path):
        raise TargetExists("the output already exists; exports never replace anything", path=path)
    if not path.parent.is_dir():
        raise UsageError("the output directory does not exist", path=str(path.parent))
    return path


def _split(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        with open_regular(path) as fd, os.fdopen(os.dup(fd), "rb") as stream:
            data = stream.read(MAX_SPLIT_MANIFEST_BYTES + 1)
        value = loads(data, max_bytes=MAX_SPLIT_MANIFEST_BYTES, source=str(path))
    except KilnError as exc:
        raise UsageError(f"--split-manifest: {exc.code}: {exc.rule}", path=str(path)) from None
    if not isinstance(value, dict):
        raise UsageError("--split-manifest must hold one JSON object", path=str(path))
    return value


def http_export_report(
    url: str,
    task: Literal["sft", "grpo"],
    *,
    name: str,
    output: Path | None,
    file: str | None,
    dataset: str | None = None,
    invalid_row_policy: str | None = None,
    input_adapter: str | None,
    split_manifest: Path | None,
    keep_server_copy: bool,
) -> dict[str, Any]:
    """The whole export over HTTP; the report ``hf export-* --url`` prints."""
    from kiln_verify.control_client.hf_export_fetch import fetch_export
    from kiln_verify.control_client.hf_exports import HfExportClient

    name = _name(name)
    target = _output(name, output)
    if (file is None) == (dataset is None):
        raise UsageError("give exactly one of --file (a path on the server) and --dataset")
    body: dict[str, Any] = {"name": name}
    if file is not None:
        body["dataset_path"] = file
    if dataset is not None:
        body["dataset"] = dataset
    if invalid_row_policy is not None:
        body["invalid_row_policy"] = invalid_row_policy
    if input_adapter is not None:
        body["input_adapter"] = input_adapter
    split = _split(split_manifest)
    if split is not None:
        body["split_manifest"] = split
    with HfExportClient(url) as client:
        summary = client.create(task, body)
        fetched = fetch_export(client, name, summary.export_sha256, target)
        report: dict[str, Any] = {
            "status": "exported",
            "archive": str(fetched.archive),
            "archive_sha256": fetched.archive_sha256,
            "archive_bytes": fetched.archive_bytes,
            **_summary(summary),
            "verified": fetched.report.to_json(),
            "server_copy": "kept" if keep_server_copy else "deleted",
        }
        if not keep_server_copy:
            _cleanup(client, url, summary)
    return report


def _summary(summary: ExportSummary) -> dict[str, Any]:
    out = summary.to_json()
    return {key: out[key] for key in ("name", "task", "export_sha256", "row_count")}


def _cleanup(client: Any, url: str, summary: ExportSummary) -> None:
    try:
        client.delete(summary.name, summary.export_sha256)
    except KilnError as exc:
        command = shlex.join(
            [
                "kiln-verify",
                "hf",
                "delete",
                "--url",
                url,
                "--name",
                summary.name,
                "--export-sha256",
                summary.export_sha256,
            ]
        )
        raise HfExportCleanupFailed(
            f"the archive is verified and published, but deleting the server copy failed "
            f"({exc.code}: {exc.rule})",
            hint=f"retry with: {command}",
        ) from None


def list_report(url: str) -> dict[str, Any]:
    from kiln_verify.control_client.hf_exports import HfExportClient

    with HfExportClient(url) as client:
        return client.list().to_json()


def delete_report(url: str, name: str, export_sha256: str | None) -> dict[str, Any]:
    from kiln_verify.control_client.hf_exports import HfExportClient

    _name(name)
    if export_sha256 is not None and not (
        export_sha256.startswith("sha256:")
        and len(export_sha256) == 71
        and all(c in "0123456789abcdef" for c in export_sha256[7:])
    ):
        raise UsageError(f"--export-sha256 {snippet(export_sha256)} is not sha256:<64 hex>")
    with HfExportClient(url) as client:
        return client.delete(name, export_sha256).to_json()
