"""The commit journal of :func:`~kiln_verify.openenv.collect.publish.publish_together`.

Three (or four) files in possibly different directories cannot be renamed into place at
one instant, so a process killed between two renames leaves some files published and not
the others. The journal makes that state recognisable and reversible. Before the first
rename, ``.NAME.commit-<token>`` (NAME: the first target's name, beside it) is written and
fsynced, and locked with ``flock`` until it is removed; it lists every target's absolute
path, the identity (device, inode, size) of the staged file that will become it, and
whether an original was to be set aside (``--force``) as ``.NAME.replaced-<token>``.
**Removing the journal is the commit point**; set-aside originals are deleted only after it.

:func:`recover` runs before every publication and target check. For each journal beside a
target whose lock it can take (its writer is dead), it undoes that commit: a target whose
identity is still the staged file's is removed and its set-aside original (if any) renamed
back; staging residue of that token is deleted; then the journal. It never removes a file
it did not stage. If a set-aside original cannot go back because something else now holds
its name, it stops with ``target_exists`` and changes nothing more (resolve by hand).
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from kiln_verify.core import rename
from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import KilnError, TargetExists, snippet
from kiln_verify.limits import MAX_COMMIT_JOURNAL_BYTES

__all__ = ["Journal", "recover"]

_SCHEMA = "kiln-verify.publish-together.v1"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Journal:
    """A written, locked journal; :meth:`commit` removes it (the commit point)."""

    def __init__(self, parent_fd: int, name: str, entries: Sequence[dict[str, Any]]) -> None:
        data = dumps_canonical({"schema": _SCHEMA, "targets": list(entries)})
        self._parent_fd = parent_fd
        self.name = name
        self._fd = os.open(name, _NEW_FILE, 0o600, dir_fd=parent_fd)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
            os.fsync(parent_fd)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Remove the journal (the commit point on success; cleanup after a rollback)."""
        if self._fd < 0:
            return
        try:
            os.unlink(self.name, dir_fd=self._parent_fd)
            os.fsync(self._parent_fd)
        finally:
            os.close(self._fd)  # releases the lock
            self._fd = -1


def entry(path: str, staged: tuple[int, int], size: int, existed: bool) -> dict[str, Any]:
    return {"path": os.path.abspath(path), "staged": list(staged), "size": size, "existed": existed}


def _read(fd: int) -> list[dict[str, Any]] | None:
    """The targets, or None for a journal cut short (written before any rename)."""
    data = os.read(fd, MAX_COMMIT_JOURNAL_BYTES + 1)
    try:
        value = loads_object(data, max_bytes=MAX_COMMIT_JOURNAL_BYTES)
    except KilnError:
        return None
    targets = value.get("targets")
    if value.get("schema") != _SCHEMA or not isinstance(targets, list):
        return None
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
    return targets


def _undo(item: dict[str, Any], token: str, *, dry: bool) -> None:
    """Undo one target's part of the commit; ``dry``: only check that it can be undone."""
    parent, name = os.path.split(item["path"])
    try:
        parent_fd = os.open(parent, _DIR)
    except OSError:
        return
    try:
        try:
            info = os.lstat(name, dir_fd=parent_fd)
        except FileNotFoundError:
            info = None
        ours = (
            info is not None
            and stat.S_ISREG(info.st_mode)
            and [info.st_dev, info.st_ino] == item["staged"]
            and info.st_size == item["size"]
        )
        aside = f".{name}.replaced-{token}"
        set_aside = item["existed"] and os.path.lexists(os.path.join(parent, aside))
        if set_aside and info is not None and not ours:
            raise TargetExists(
                f"an interrupted publication set the original {snippet(name)} aside as "
                f"{snippet(aside)}, and another file now holds its name",
                path=item["path"],
                hint=f"keep one of {name} and {aside} yourself",
            )
        if dry:
            return
        if ours:
            os.unlink(name, dir_fd=parent_fd)
        if item["existed"]:
            with suppress(FileNotFoundError):
                rename.noreplace(parent_fd, aside, name, allow_link=True)
        with suppress(FileNotFoundError):
            os.unlink(f".{name}.incomplete-{token}", dir_fd=parent_fd)
        os.fsync(parent_fd)
    finally:
        os.close(parent_fd)


def recover(paths: Sequence[str]) -> None:
    """Undo every dead writer's uncommitted publication journaled beside ``paths``."""
    for path in paths:
        parent, name = os.path.split(os.path.abspath(path))
        pattern = re.compile(re.escape(f".{name}.commit-") + r"([0-9a-f]{16})")
        try:
            parent_fd = os.open(parent, _DIR)
        except OSError:
            continue  # checked (and reported) by the caller
        try:
            for candidate in sorted(os.listdir(parent_fd)):
                found = pattern.fullmatch(candidate)
                if found is not None:
                    _recover_one(parent_fd, candidate, found[1])
        finally:
            os.close(parent_fd)


def _recover_one(parent_fd: int, journal: str, token: str) -> None:
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a live publication
        targets = _read(fd)
        for dry in (True, False):  # refuse before changing anything
            for item in reversed(targets or []):
                _undo(item, token, dry=dry)
        os.unlink(journal, dir_fd=parent_fd)
        os.fsync(parent_fd)
    finally:
        os.close(fd)
