"""Creating one export: admission, then the library's own writers, then publication.

Blocking; the caller holds the registry lock and runs this in a worker thread. Order:

1. admission without touching the registry: exactly one data source, a server-local
   ``dataset_path`` that is absolute and a regular file, an input adapter the server's
   adapter set holds (``hf_trl_invalid_request``, ``adapter_not_found``);
2. the registry: unexpected entries fail closed, crash-left staging and deletion
   directories are removed, the name must be free (``hf_trl_export_exists``), the count
   below ``MAX_HF_EXPORTS`` (``hf_trl_export_capacity``);
3. a private ``.staging-NAME-<hex>`` directory receives the inline rows (compact JSONL,
   GRPO groups in their canonical serialization) and the pretty-printed split manifest,
   and :func:`~kiln_verify.hf.export.writer.export_sft` / ``export_grpo`` build and verify
   the bundle there, exactly as ``kiln-verify hf export-*`` does locally: an HTTP export
   and a local export of the same inputs are the same bytes;
4. the bundle directory is renamed into the registry (kernel no-replace), the registry
   synced, and staging removed (always, also on failure).

A refusal of the inputs by the writer (rows, templates, corpus identities against the
resident model) is ``hf_trl_invalid_request``; a failure of the file system, the
publication or a verification after admission is ``hf_trl_export_failed``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.hf_exports import store
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.core import rename
from kiln_verify.core.jsonenc import dumps_compact, dumps_pretty
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import (
    ApiAdapterNameInvalid,
    ApiAdapterNotFound,
    ApiHfTrlExportCapacity,
    ApiHfTrlExportExists,
    ApiHfTrlExportFailed,
    ApiHfTrlInvalidRequest,
    ArchiveError,
    DigestError,
    FileAccessError,
    HfBundleExtraFile,
    HfBundleMissingFile,
    HfIdentityMismatch,
    KilnError,
    PublishError,
    SizeMismatch,
    snippet,
)
from kiln_verify.hf.bundle_files import EXPORT_MANIFEST, read_bundle_file
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.export.writer import ExportOutcome, export_grpo, export_sft
from kiln_verify.hf.manifest import grpo_row_bytes, read_export
from kiln_verify.hf.manifest.http_exports import ExportSummary, GrpoExportRequest, SftExportRequest
from kiln_verify.hf.manifest.read import parse_grpo_group
from kiln_verify.limits import MAX_MANIFEST_BYTES

__all__ = ["create_grpo", "create_sft", "read_summary"]

_FAILED = (
    PublishError,
    FileAccessError,
    DigestError,
    SizeMismatch,
    HfIdentityMismatch,
    HfBundleExtraFile,
    HfBundleMissingFile,
    ArchiveError,
)
"""Writer errors that are the server's fault (its disk, its verification), not the input's."""

Write = Callable[[ExportSource, Path, Path], ExportOutcome]
"""(source, staging input directory, output archive path) -> the writer's outcome."""


def _present(text: str | None) -> bool:
    return text is not None and text.strip() != ""


def _one_source(sources: dict[str, bool]) -> None:
    given = [name for name, present in sources.items() if present]
    if len(given) != 1:
        names = ", ".join(sources)
        raise ApiHfTrlInvalidRequest(
            f"give exactly one of {names} (non-empty); got {', '.join(given) or 'none'}"
        )


def _server_file(path: str) -> str:
    if not os.path.isabs(path):
        raise ApiHfTrlInvalidRequest(
            f"dataset_path {snippet(path)} is not absolute; it is a path on the server"
        )
    try:
        with open_regular(path):
            pass
    except KilnError as exc:
        raise ApiHfTrlInvalidRequest(f"dataset_path: {exc.code}: {exc.rule}") from None
    return path


def _adapter_dir(config: ServerConfig, name: str | None) -> Path | None:
    if name is None:
        return None
    from kiln_verify.control.resident.names import check_adapter_name
    from kiln_verify.control.resident.store import adapters_root

    if name != name.strip():
        raise ApiHfTrlInvalidRequest("input_adapter has leading or trailing whitespace")
    try:
        check_adapter_name(name)
    except ApiAdapterNameInvalid as exc:
        raise ApiHfTrlInvalidRequest(f"input_adapter: {exc.rule}") from None
    directory = adapters_root(config) / name
    if not directory.is_dir() or directory.is_symlink():
        raise ApiAdapterNotFound(f"the server has no adapter named {snippet(name)}")
    return directory


def read_summary(directory: Path, name: str) -> ExportSummary:
    """The summary from the manifest's self-verifying record (artifacts not rehashed)."""
    data = read_bundle_file(str(directory), EXPORT_MANIFEST, MAX_MANIFEST_BYTES)
    return ExportSummary.of(name, read_export(data, source=str(directory / EXPORT_MANIFEST)))


def _build(
    config: ServerConfig,
    root: Path,
    name: str,
    adapter: Path | None,
    split: dict[str, object] | None,
    inputs: dict[str, bytes],
    write: Write,
) -> ExportSummary:
    from kiln_verify import limits
    from kiln_verify.control.resident.barrier import adapter_barrier
    from kiln_verify.control.resident.store import adapters_root

    model = require_resident_model(config, "an HF/TRL export")
    found = store.scan(root)
    store.remove_leftovers(root, found)
    if name in found.published or os.path.lexists(store.bundle_dir(root, name)):
        raise ApiHfTrlExportExists(f"an export named {name} exists; names are never reused")
    if len(found.published) >= limits.MAX_HF_EXPORTS:
        raise ApiHfTrlExportCapacity(
            f"the registry holds {len(found.published)} exports (MAX_HF_EXPORTS = "
            f"{limits.MAX_HF_EXPORTS})"
        )
    staging = store.new_private_dir(root, store.STAGING_PREFIX, name)
    try:
        given = staging / "input"
        given.mkdir(mode=0o700)
        (staging / "out").mkdir(mode=0o700)
        for file, data in inputs.items():
            (given / file).write_bytes(data)
        if split is not None:
            (given / "split_manifest.json").write_bytes(dumps_pretty(split))
        source = ExportSource(
            model=model.path,
            input_adapter=adapter,
            served_model_id=model.served_model_id,
            split_manifest=None if split is None else given / "split_manifest.json",
        )
        try:
            if adapter is None:
                outcome = write(source, given, staging / "out" / f"{name}.kiln-hf.tar.gz")
            else:
                with adapter_barrier(adapters_root(config)):
                    outcome = write(source, given, staging / "out" / f"{name}.kiln-hf.tar.gz")
        except _FAILED as exc:
            raise ApiHfTrlExportFailed(f"the export failed: {exc.code}: {exc.rule}") from None
        except KilnError as exc:
            raise ApiHfTrlInvalidRequest(f"{exc.code}: {exc.rule}", hint=exc.hint) from None
        _publish(outcome.directory, root, name)
    except OSError as exc:
        raise ApiHfTrlExportFailed(f"the export failed: {exc.strerror or exc}") from None
    finally:
        store.remove_tree(root, staging.name)
    return read_summary(store.bundle_dir(root, name), name)


def _publish(built: Path, root: Path, name: str) -> None:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    source_fd = os.open(built.parent, flags)
    root_fd = os.open(root, flags)
    try:
        try:
            rename.between(source_fd, built.name, root_fd, f"{name}.kiln-hf", allow_link=False)
        except FileExistsError:
            raise ApiHfTrlExportExists(f"an export named {name} exists") from None
        except rename.Unsupported:
            raise ApiHfTrlExportFailed("this file system has no no-replace rename") from None
        os.fsync(root_fd)
    finally:
        os.close(source_fd)
        os.close(root_fd)


def create_sft(config: ServerConfig, root: Path, request: SftExportRequest) -> ExportSummary:
    """``POST /v1/train/hf/sft/exports`` (blocking, registry lock held)."""
    path = request.dataset_path
    if request.dataset is not None and not _present(request.dataset):
        raise ApiHfTrlInvalidRequest("dataset must not be blank")
    _one_source(
        {
            "examples": bool(request.examples),
            "dataset_path": _present(path),
            "dataset": _present(request.dataset),
        }
    )
    if _present(request.dataset):
        raise ApiHfTrlInvalidRequest(
            "this server has no registered datasets (nor corrections); send examples or a "
            "dataset_path"
        )
    adapter = _adapter_dir(config, request.input_adapter)
    inputs: dict[str, bytes] = {}
    if request.examples:
        inputs["examples.jsonl"] = b"".join(dumps_compact(row) + b"\n" for row in request.examples)
    else:
        assert path is not None
        path = _server_file(path)

    def write(source: ExportSource, given: Path, output: Path) -> ExportOutcome:
        if request.examples:
            return export_sft(
                source,
                dataset=given / "examples.jsonl",
                name=request.name,
                output=output,
                invalid_row_policy=request.invalid_row_policy,
                data_source="inline",
            )
        assert path is not None
        return export_sft(
            source,
            dataset=path,
            name=request.name,
            output=output,
            invalid_row_policy=request.invalid_row_policy,
        )

    return _build(config, root, request.name, adapter, request.split_manifest, inputs, write)


def create_grpo(config: ServerConfig, root: Path, request: GrpoExportRequest) -> ExportSummary:
    """``POST /v1/train/hf/grpo/exports`` (blocking, registry lock held)."""
    path = request.dataset_path
    _one_source({"groups": bool(request.groups), "dataset_path": _present(path)})
    adapter = _adapter_dir(config, request.input_adapter)
    inputs: dict[str, bytes] = {}
    if request.groups:
        rows = []
        for index, value in enumerate(request.groups):
            try:
                rows.append(grpo_row_bytes(parse_grpo_group(value, line=index + 1)))
            except KilnError as exc:
                raise ApiHfTrlInvalidRequest(f"groups[{index}]: {exc.code}: {exc.rule}") from None
        inputs["groups.jsonl"] = b"".join(rows)
    else:
        assert path is not None
        path = _server_file(path)

    def write(source: ExportSource, given: Path, output: Path) -> ExportOutcome:
        if request.groups:
            dataset, source_name = str(given / "groups.jsonl"), "inline"
        else:
            assert path is not None
            dataset, source_name = path, path
        return export_grpo(
            source, dataset=dataset, name=request.name, output=output, source_name=source_name
        )

    return _build(config, root, request.name, adapter, request.split_manifest, inputs, write)
