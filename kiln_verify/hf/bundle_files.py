"""The files of an HF/TRL bundle: their names, and reading them as their identities say.

Every module that opens a bundle (the verifier, the exporter, the sealed import envelope,
the importer and ``hf verify-import``) reads its files through here: the fixed names, the
exact recursive file set (links and special files refused), bounded reads beneath the root
and reads proven to be the bytes an identity names (issue 14.6), the identities each
manifest declares, and the result manifest paired with its export.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from typing import Final

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.paths import open_regular_beneath, open_root
from kiln_verify.errors import (
    DigestMismatch,
    HfBundleExtraFile,
    HfIdentityMismatch,
    PathNotRegular,
    PathSymlink,
    RecordInvalid,
    UsageError,
)
from kiln_verify.hf.manifest import ExportManifest, FileIdentity, TrainingResult, read_result
from kiln_verify.limits import MAX_MANIFEST_BYTES

__all__ = [
    "ARCHIVE_SUFFIX",
    "BUNDLE_SUFFIX",
    "EXPORT_FILES",
    "EXPORT_MANIFEST",
    "RESULT_FILES",
    "RESULT_MANIFEST",
    "bundle_files",
    "bundle_name",
    "export_identities",
    "identified_lines",
    "read_bundle_file",
    "read_identified",
    "read_paired_result",
    "result_identities",
]

EXPORT_MANIFEST: Final = "kiln_hf_export.json"
RESULT_MANIFEST: Final = "kiln_hf_result.json"
RESULT_FILES: Final = (
    "executed_train.py",
    "adapter_config.json",
    "adapter_model.safetensors",
    RESULT_MANIFEST,
)
BUNDLE_SUFFIX: Final = ".kiln-hf"
ARCHIVE_SUFFIX: Final = ".kiln-hf.tar.gz"
EXPORT_FILES: Final = frozenset(
    {
        EXPORT_MANIFEST,
        "kiln_model_config.json",
        "tokenizer.json",
        "chat_template.jinja",
        "kiln_training_chat_template.jinja",
        "training_chat_template.jinja",
        "train.jsonl",
        "train.py",
        "requirements.lock",
        "sft_ingestion.json",
        "split_manifest.json",
        "input_adapter/adapter_config.json",
        "input_adapter/adapter_manifest.json",
        "input_adapter/adapter_model.safetensors",
    }
)
"""Every path an export manifest can declare (each identity has a fixed path), and itself."""


def bundle_name(archive: str | os.PathLike[str]) -> str:
    """``NAME.kiln-hf`` for ``.../NAME.kiln-hf.tar.gz`` (the archive's single root)."""
    base = os.path.basename(os.fspath(archive))
    if not base.endswith(ARCHIVE_SUFFIX) or len(base) == len(ARCHIVE_SUFFIX):
        raise UsageError(
            f"an archive must be named NAME{ARCHIVE_SUFFIX}",
            path=os.fspath(archive),
            hint="keep the exported archive's file name; it names the bundle root",
        )
    return base.removesuffix(".tar.gz")


def bundle_files(root: str) -> set[str]:
    """Every regular file beneath ``root`` (relative, ``/``-separated); links and special
    files fail; an empty directory is an extra entry."""
    found: set[str] = set()

    def walk(fd: int, prefix: str) -> None:
        for name in sorted(os.listdir(fd)):
            rel = prefix + name
            info = os.lstat(name, dir_fd=fd)
            shown = os.path.join(root, rel)
            if stat.S_ISLNK(info.st_mode):
                raise PathSymlink("a bundle must not contain symbolic links", path=shown)
            if stat.S_ISDIR(info.st_mode):
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    before = len(found)
                    walk(child, rel + "/")
                    if len(found) == before:
                        raise HfBundleExtraFile(
                            "an empty directory is not part of any bundle", path=shown
                        )
                finally:
                    os.close(child)
            elif stat.S_ISREG(info.st_mode):
                found.add(rel)
            else:
                raise PathNotRegular("a bundle holds only regular files", path=shown)

    fd = open_root(root)
    try:
        walk(fd, "")
    finally:
        os.close(fd)
    return found


def read_bundle_file(root: str, relative: str, max_bytes: int) -> bytes:
    with open_regular_beneath(root, relative) as fd, os.fdopen(os.dup(fd), "rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RecordInvalid(
            f"{relative} is larger than {max_bytes} bytes", path=os.path.join(root, relative)
        )
    return data


def _changed(shown: str) -> DigestMismatch:
    return DigestMismatch(
        "the file changed after its identity was checked (read again, it is other bytes)",
        path=shown,
    )


def read_identified(root: str, ident: FileIdentity, max_bytes: int) -> bytes:
    """A declared file's bytes for a content check, read through one descriptor and proven
    to be the bytes its identity names (size and SHA-256), so a file swapped after
    :func:`~kiln_verify.core.digest.verify` hashed it is refused (``digest_mismatch``)
    instead of being checked in place of the hashed one (issue 14.6)."""
    data = read_bundle_file(root, ident.relative_path, max_bytes)
    if len(data) != ident.size_bytes or str(sha256_bytes(data)) != ident.sha256:
        raise _changed(os.path.join(root, ident.relative_path))
    return data


def export_identities(export: ExportManifest) -> list[FileIdentity]:
    """Every file identity an export manifest declares (the manifest itself excluded)."""
    model, data = export.model, export.data
    out = [
        model.config_file,
        model.tokenizer,
        model.chat_template,
        model.native_training_chat_template,
        model.trl_training_chat_template,
        data.dataset,
        export.reference_script,
        export.environment_lock,
    ]
    if data.sft_selection is not None:
        out.append(data.sft_selection.ingestion_receipt)
    if data.split_manifest is not None:
        out.append(data.split_manifest)
    adapter = export.input_adapter
    if adapter is not None:
        out += [adapter.config, adapter.model]
        if adapter.kiln_manifest is not None:
            out.append(adapter.kiln_manifest)
    return out


def read_paired_result(root: str, export: ExportManifest, *, holder: str) -> TrainingResult:
    """The training result beside ``export`` under ``root``; it must name that export
    and its task (``holder``: what the two sit in, for the message)."""
    source = os.path.join(root, RESULT_MANIFEST)
    result = read_result(read_bundle_file(root, RESULT_MANIFEST, MAX_MANIFEST_BYTES), source=source)
    if result.export_sha256 != export.export_sha256:
        raise HfIdentityMismatch(
            f"the result names export {result.export_sha256}, the {holder}'s export is "
            f"{export.export_sha256}",
            path=source,
        )
    if result.task != export.task:
        raise HfIdentityMismatch(
            f"the result is for task {result.task!r}, the export for {export.task!r}",
            path=source,
        )
    return result


def result_identities(result: TrainingResult) -> list[FileIdentity]:
    return [result.trainer.script, result.output_adapter.config, result.output_adapter.model]


def identified_lines(root: str, ident: FileIdentity, max_line: int) -> Iterator[tuple[int, bytes]]:
    """The LF-terminated rows of a declared file; at the end the bytes read must be the
    identity's (the rows checked are the rows hashed, issue 14.6)."""
    relative = ident.relative_path
    shown = os.path.join(root, relative)
    hasher = hashlib.sha256()
    size = 0
    with open_regular_beneath(root, relative) as fd, os.fdopen(os.dup(fd), "rb") as stream:
        number = 0
        while True:
            line = stream.readline(max_line + 1)
            if not line:
                if size != ident.size_bytes or "sha256:" + hasher.hexdigest() != ident.sha256:
                    raise _changed(shown)
                return
            hasher.update(line)
            size += len(line)
            number += 1
            if len(line) > max_line:
                raise RecordInvalid(
                    f"the row is longer than {max_line} bytes", path=shown, line=number
                )
            if not line.endswith(b"\n"):
                raise RecordInvalid("the last row lacks its LF", path=shown, line=number)
            yield number, line
