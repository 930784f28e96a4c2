"""The commit journal: what a journaled publication published, so a later run can undo it.

Before its first rename a journaled publication writes ``COMMIT`` into its first staging
directory (``.KEY.staging-<token>``, locked by its writer), fsyncs it and the directory.
It lists every target's absolute path, the identity of the entry that will become it
(device, inode, size, and for a directory every entry beneath: a bundle someone has
since used is never taken back), whether an original was set aside as
``.NAME.replaced-<token>``, and the staging directory it was built in. **Removing the
journal is the commit point.**

The journals of the two publishers this one replaced are read too, so what they left
behind is still recovered (format frozen at commit 909997b):

- ``.NAME.commit-<token>`` beside the first target, a locked file of schema
  ``kiln-verify.publish-together.v1`` (``targets``: ``path``, ``staged`` [dev, ino],
  ``size``, ``existed``);
- ``COMMIT`` of schema ``kiln-verify.group-commit.v1`` in ``.KEY.staging-<token>``
  (``names`` and their ``entries``: identities as above, relative to the parent).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.paths import validate_relative_path
from kiln_verify.core.publisher.targets import DIR_FLAGS
from kiln_verify.errors import KilnError, PublishFailed
from kiln_verify.limits import MAX_COMMIT_JOURNAL_BYTES

__all__ = ["JOURNAL", "Record", "identity", "read", "read_together", "write"]

JOURNAL = "COMMIT"
SCHEMA = "kiln-verify.publication.v1"
GROUP_SCHEMA = "kiln-verify.group-commit.v1"
TOGETHER_SCHEMA = "kiln-verify.publish-together.v1"
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Record:
    """One journaled target: where it is, what was published there, what was set aside."""

    parent: str
    name: str
    identity: dict[str, Any]
    existed: bool
    stage: str | None
    """The staging directory it was built in (None: a sibling ``.NAME.incomplete-*``)."""

    @property
    def path(self) -> str:
        return os.path.join(self.parent, self.name)


def identity(dir_fd: int, name: str) -> dict[str, Any]:
    """What a published entry must still be for a rollback to take it back."""
    info = os.lstat(name, dir_fd=dir_fd)
    out: dict[str, Any] = {"dev": info.st_dev, "ino": info.st_ino}
    if stat.S_ISREG(info.st_mode):
        out.update(kind="file", size=info.st_size)
        return out
    if not stat.S_ISDIR(info.st_mode):
        return {**out, "kind": "other"}
    tree: list[list[Any]] = []
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    try:
        _walk(fd, "", tree)
    finally:
        os.close(fd)
    out.update(kind="dir", tree=sorted(tree))
    return out


def _walk(fd: int, prefix: str, tree: list[list[Any]]) -> None:
    for child in os.listdir(fd):
        info = os.lstat(child, dir_fd=fd)
        size = info.st_size if stat.S_ISREG(info.st_mode) else 0
        tree.append([prefix + child, stat.S_IFMT(info.st_mode), info.st_ino, size])
        if stat.S_ISDIR(info.st_mode):
            sub = os.open(child, DIR_FLAGS, dir_fd=fd)
            try:
                _walk(sub, prefix + child + "/", tree)
            finally:
                os.close(sub)


def write(stage_fd: int, records: Sequence[Record]) -> None:
    """Write and fsync the journal, then its directory (three file-system steps)."""
    targets = [
        {"path": r.path, "identity": r.identity, "existed": r.existed, "stage": r.stage}
        for r in records
    ]
    data = dumps_canonical({"schema": SCHEMA, "targets": targets})
    if len(data) > MAX_COMMIT_JOURNAL_BYTES:
        raise PublishFailed(
            f"the commit journal would exceed MAX_COMMIT_JOURNAL_BYTES = {MAX_COMMIT_JOURNAL_BYTES}"
        )
    fd = os.open(JOURNAL, NEW_FILE, 0o600, dir_fd=stage_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.fsync(stage_fd)


def _load(fd: int) -> dict[str, Any] | None:
    data = os.read(fd, MAX_COMMIT_JOURNAL_BYTES + 1)
    try:
        return loads_object(data, max_bytes=MAX_COMMIT_JOURNAL_BYTES)
    except KilnError:
        return None  # cut short: it is complete and fsynced before the first rename


def read(stage_fd: int, stage_path: str) -> list[Record] | None:
    """The records of ``COMMIT`` in a staging directory (either schema), or None when
    there is none or it was cut short (then nothing was ever renamed)."""
    try:
        fd = os.open(JOURNAL, _READ, dir_fd=stage_fd)
    except FileNotFoundError:
        return None
    try:
        value = _load(fd)
    finally:
        os.close(fd)
    if value is None:
        return None
    if value.get("schema") == GROUP_SCHEMA:
        return _group_records(value, stage_path)
    targets = value.get("targets")
    if value.get("schema") != SCHEMA or not isinstance(targets, list):
        return None
    records = []
    for item in targets:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and os.path.isabs(item["path"])
            and isinstance(item.get("identity"), dict)
            and isinstance(item.get("existed"), bool)
            and isinstance(item.get("stage"), (str, type(None)))
        ):
            return None
        parent, name = os.path.split(item["path"])
        records.append(Record(parent, name, item["identity"], item["existed"], item["stage"]))
    return records


def _group_records(value: dict[str, Any], stage_path: str) -> list[Record] | None:
    names = value.get("names")
    entries = value.get("entries")
    if not isinstance(names, list) or not isinstance(entries, dict):
        return None
    if not all(isinstance(n, str) and len(validate_relative_path(n)) == 1 for n in names):
        return None
    parent = os.path.dirname(stage_path)
    found = [(n, entries.get(n)) for n in names]
    return [Record(parent, n, e, False, stage_path) for n, e in found if isinstance(e, dict)]


def read_together(fd: int) -> list[Record] | None:
    """The records of an old ``.NAME.commit-<token>`` journal (open, locked ``fd``)."""
    value = _load(fd)
    if value is None or value.get("schema") != TOGETHER_SCHEMA:
        return None
    targets = value.get("targets")
    if not isinstance(targets, list):
        return None
    records = []
    for item in targets:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and os.path.isabs(item["path"])
            and isinstance(item.get("staged"), list)
            and isinstance(item.get("size"), int)
            and isinstance(item.get("existed"), bool)
        ):
            return None
        dev, ino = (item["staged"] + [0, 0])[:2]
        staged = {"dev": dev, "ino": ino, "kind": "file", "size": item["size"]}
        head, name = os.path.split(item["path"])
        records.append(Record(head, name, staged, item["existed"], None))
    return records
