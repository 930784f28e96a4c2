"""Reading, building and publishing the trainer's evidence files.

Both files are peer-visible evidence that a run keeps and serves, so they are read like
any other artifact: :func:`read_evidence_file` opens with ``O_NOFOLLOW`` (a symlink is
``path_symlink``), requires a regular file on the opened descriptor
(``path_not_regular``), checks the size there before reading and again while reading
(``limit_exceeded`` above ``MAX_TRAINING_EVIDENCE_BYTES``). :func:`write_evidence`
publishes both files together through the one publisher (all or none, no replacement
unless ``force``), after checking the manifest binds the receipt bytes it is written with;
a refusal writes nothing. :func:`adapter_files` lists an adapter directory's files the
same way (no symlink at any depth, only regular files), for the manifest and the chain.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from kiln_verify.core.digest import hash_fd, sha256_bytes
from kiln_verify.core.jsonio import dumps_pretty, loads_object
from kiln_verify.core.paths import open_regular, open_regular_beneath, open_root
from kiln_verify.core.publisher import Pathish, publish_files
from kiln_verify.errors import (
    FileAccessError,
    LimitExceeded,
    PathNotRegular,
    PathSymlink,
    TrainingChainManifestMismatch,
)
from kiln_verify.limits import (
    MAX_ADAPTER_FILE_BYTES,
    MAX_ADAPTER_MANIFEST_FILES,
    MAX_TRAINING_EVIDENCE_BYTES,
)
from kiln_verify.openenv.training.evidence import (
    ADAPTER_MANIFEST_SCHEMA,
    AdapterFile,
    AdapterManifest,
    TrainReceipt,
)
from kiln_verify.openenv.training.lineage import check_lineage
from kiln_verify.records import validate_record

__all__ = [
    "ADAPTER_MANIFEST_FILE",
    "TRAIN_RECEIPT_FILE",
    "adapter_files",
    "build_adapter_manifest",
    "evidence_bytes",
    "hash_adapter_file",
    "read_adapter_manifest",
    "read_evidence_file",
    "read_train_receipt",
    "write_evidence",
]

TRAIN_RECEIPT_FILE = "train_receipt.json"
ADAPTER_MANIFEST_FILE = "adapter_manifest.json"


def _too_large(what: str, observed: int, path: str | None) -> LimitExceeded:
    return LimitExceeded(
        what,
        limit="MAX_TRAINING_EVIDENCE_BYTES",
        bound=MAX_TRAINING_EVIDENCE_BYTES,
        observed=observed,
        path=path,
    )


def read_evidence_file(path: Pathish) -> bytes:
    """The bytes of a regular, non-symlink evidence file of at most 4 MiB."""
    shown = os.fspath(path)
    with open_regular(path) as fd:
        size = os.fstat(fd).st_size
        if size > MAX_TRAINING_EVIDENCE_BYTES:
            raise _too_large("training evidence file", size, shown)
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                chunk = os.read(fd, MAX_TRAINING_EVIDENCE_BYTES + 1 - total)
            except OSError as exc:
                raise FileAccessError(f"read failed: {exc.strerror}", path=shown) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_TRAINING_EVIDENCE_BYTES:  # grew while being read
                raise _too_large("training evidence file", total, shown)
    return b"".join(chunks)


def read_train_receipt(data: bytes, source: str | None = None) -> TrainReceipt:
    """A receipt's bytes as a record: strict JSON, shape, then the lineage's totals."""
    value = loads_object(data, max_bytes=MAX_TRAINING_EVIDENCE_BYTES, source=source)
    receipt = validate_record(TrainReceipt, value, source=source)
    check_lineage(receipt.training_data, source)
    return receipt


def read_adapter_manifest(data: bytes, source: str | None = None) -> AdapterManifest:
    """A manifest's bytes as a record (strict JSON, shape, sorted files, total)."""
    value = loads_object(data, max_bytes=MAX_TRAINING_EVIDENCE_BYTES, source=source)
    return validate_record(AdapterManifest, value, source=source)


def evidence_bytes(record: TrainReceipt | AdapterManifest) -> bytes:
    """The file bytes of an evidence record: pretty JSON + LF, at most 4 MiB."""
    data = dumps_pretty(record.to_json())
    if len(data) > MAX_TRAINING_EVIDENCE_BYTES:
        raise _too_large("training evidence record", len(data), None)
    return data


def _walk(root: str, fd: int, prefix: str, found: list[str]) -> None:
    with os.scandir(fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        relative = prefix + name
        shown = os.path.join(root, relative)
        info = os.lstat(name, dir_fd=fd)
        if stat.S_ISLNK(info.st_mode):
            raise PathSymlink("symbolic links are not followed", path=shown)
        if stat.S_ISDIR(info.st_mode):
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                _walk(root, child, relative + "/", found)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode):
            found.append(relative)
            if len(found) > MAX_ADAPTER_MANIFEST_FILES:
                raise LimitExceeded(
                    "adapter directory",
                    limit="MAX_ADAPTER_MANIFEST_FILES",
                    bound=MAX_ADAPTER_MANIFEST_FILES,
                    path=root,
                )
        else:
            raise PathNotRegular("not a regular file or directory", path=shown)


def adapter_files(directory: Pathish) -> list[str]:
    """Every regular file beneath ``directory`` as a '/'-separated relative path, in byte
    order; a symlink anywhere is ``path_symlink``, a FIFO or socket ``path_not_regular``."""
    root = os.fspath(directory)
    fd = open_root(root)  # the directory the caller chose; everything beneath is checked
    found: list[str] = []
    try:
        _walk(root, fd, "", found)
    finally:
        os.close(fd)
    return sorted(found, key=lambda path: path.encode("utf-8", "surrogateescape"))


def hash_adapter_file(directory: Pathish, relative: str) -> AdapterFile:
    """One adapter file's identity, read beneath ``directory`` without following links."""
    with open_regular_beneath(directory, relative) as fd:
        digest = hash_fd(
            fd, max_bytes=MAX_ADAPTER_FILE_BYTES, shown=os.path.join(os.fspath(directory), relative)
        )
    return AdapterFile(relative_path=relative, bytes=digest.size_bytes, sha256=str(digest.sha256))


def _identities(directory: Pathish) -> Iterator[AdapterFile]:
    for relative in adapter_files(directory):
        yield hash_adapter_file(directory, relative)


def build_adapter_manifest(
    directory: Pathish, *, receipt: TrainReceipt, receipt_data: bytes
) -> AdapterManifest:
    """The manifest of the adapter in ``directory``, bound to ``receipt`` (whose file bytes
    are ``receipt_data``)."""
    files = list(_identities(directory))
    return AdapterManifest(
        schema=ADAPTER_MANIFEST_SCHEMA,
        adapter_name=receipt.output_adapter,
        train_receipt_sha256=str(sha256_bytes(receipt_data)),
        corpus_sha256=receipt.corpus_sha256,
        group_plan_sha256=receipt.training_data.group_plan_sha256,
        files=files,
        total_bytes=sum(entry.bytes for entry in files),
    )


def write_evidence(
    directory: Pathish,
    receipt: TrainReceipt,
    manifest: AdapterManifest,
    *,
    force: bool = False,
) -> tuple[bytes, bytes]:
    """Publish ``train_receipt.json`` and ``adapter_manifest.json`` into ``directory``
    together; returns their bytes. The manifest must name this receipt's bytes
    (``training_chain_manifest_mismatch`` otherwise); nothing is written on a refusal."""
    receipt_data = evidence_bytes(receipt)
    manifest_data = evidence_bytes(manifest)
    if manifest.train_receipt_sha256 != str(sha256_bytes(receipt_data)):
        raise TrainingChainManifestMismatch(
            "train_receipt_sha256 is not the SHA-256 of the receipt being written"
        )
    base = os.fspath(directory)
    publish_files(
        [
            (os.path.join(base, TRAIN_RECEIPT_FILE), receipt_data),
            (os.path.join(base, ADAPTER_MANIFEST_FILE), manifest_data),
        ],
        force=force,
    )
    return receipt_data, manifest_data
