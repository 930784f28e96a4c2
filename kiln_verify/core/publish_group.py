"""Publish several sibling entries of one directory together, or not at all.

An HF export is two entries, ``NAME.kiln-hf/`` and ``NAME.kiln-hf.tar.gz``, and no single
rename can publish two names. So both are built and verified in one private staging
directory ``.KEY.staging-<16 hex>`` (mode 0700) beside them, and published by a journaled
commit that a later run recognises:

1. The staging directory is created under a temporary name, locked (``flock``, held until
   the end) and only then given its discoverable name, so a lock-free staging directory
   always belongs to a process that has died.
2. When the caller's block ends, a journal ``COMMIT`` listing every entry with its
   identity (device, inode, size, and for a directory every entry beneath it) is written
   into the staging directory and fsynced. Only then is each entry renamed into the parent
   with ``renameat2(RENAME_NOREPLACE)``, in the order given; the parent is fsynced and
   ``before_commit`` (a re-verification) runs.
3. **Removing the journal is the commit point.** Afterwards the staging directory is
   removed. Any failure before it (including Ctrl-C) moves the published entries back
   into staging and removes it: nothing is left.

A process killed outright (SIGKILL, power loss) before the commit point can leave some
entries published next to its staging directory and journal. :func:`recover_group`, which
every publication of the same ``KEY`` runs first, finds staging directories whose owner
is dead and rolls them back: each published entry whose identity is still exactly the
journal's is moved back into staging, then the staging directory is removed. It never
touches an entry that differs from what the journal recorded (``target_exists`` naming
the leftover, to be resolved by hand), a live publication, or anything without a journal
entry. A staging directory without a journal never published anything and is removed.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from kiln_verify.core import rename
from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.paths import validate_relative_path
from kiln_verify.errors import (
    KilnError,
    PublishFailed,
    SymlinkRefused,
    TargetExists,
    snippet,
)
from kiln_verify.limits import MAX_COMMIT_JOURNAL_BYTES

__all__ = ["JOURNAL", "STAGING_INFIX", "GroupStage", "recover_group", "staged_group"]

JOURNAL = "COMMIT"
STAGING_INFIX = ".staging-"
_SCHEMA = "kiln-verify.group-commit.v1"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

Pathish = str | os.PathLike[str]


@dataclass(frozen=True)
class GroupStage:
    """The private staging directory; build each entry at ``entry(name)``."""

    path: str

    def entry(self, name: str) -> str:
        return os.path.join(self.path, name)


def _identity(dir_fd: int, name: str) -> dict[str, Any]:
    """What a published entry must still be for a rollback to move it: its inode, size,
    and for a directory every entry beneath (so a bundle someone has since trained, or
    edited, is never taken back)."""
    info = os.lstat(name, dir_fd=dir_fd)
    out: dict[str, Any] = {"dev": info.st_dev, "ino": info.st_ino}
    if stat.S_ISREG(info.st_mode):
        out.update(kind="file", size=info.st_size)
        return out
    if not stat.S_ISDIR(info.st_mode):
        return {**out, "kind": "other"}
    tree: list[list[Any]] = []
    fd = os.open(name, _DIR, dir_fd=dir_fd)
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
            sub = os.open(child, _DIR, dir_fd=fd)
            try:
                _walk(sub, prefix + child + "/", tree)
            finally:
                os.close(sub)


def _open_parent(parent: Pathish) -> int:
    shown = os.fspath(parent)
    try:
        info = os.lstat(shown)
    except FileNotFoundError:
        raise PublishFailed("the output directory does not exist", path=shown) from None
    if stat.S_ISLNK(info.st_mode):
        raise SymlinkRefused("the output directory is a symbolic link", path=shown)
    if not stat.S_ISDIR(info.st_mode):
        raise PublishFailed("the output directory is not a directory", path=shown)
    return os.open(shown, _DIR)


def _read_journal(stage_fd: int) -> dict[str, Any] | None:
    """The journal, or None when there is none or it was cut short (then no entry was
    ever renamed: the journal is complete and fsynced before the first rename)."""
    try:
        fd = os.open(JOURNAL, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stage_fd)
    except FileNotFoundError:
        return None
    try:
        data = os.read(fd, MAX_COMMIT_JOURNAL_BYTES + 1)
    finally:
        os.close(fd)
    try:
        journal = loads_object(data, max_bytes=MAX_COMMIT_JOURNAL_BYTES)
    except KilnError:
        return None
    names = journal.get("names")
    if journal.get("schema") != _SCHEMA or not isinstance(names, list):
        return None
    if not all(isinstance(n, str) and len(validate_relative_path(n)) == 1 for n in names):
        return None
    return journal


def _roll_back(parent_fd: int, stage: str, stage_fd: int, journal: dict[str, Any]) -> None:
    """Move every published entry that is still exactly what the journal recorded back
    into staging; refuse (changing nothing more) when one differs."""
    entries = journal.get("entries", {})
    for name in reversed(journal["names"]):
        try:
            found = _identity(parent_fd, name)
        except FileNotFoundError:
            continue  # never renamed, or already moved back
        if found != entries.get(name):
            raise TargetExists(
                f"an interrupted publication left {snippet(stage)} beside {snippet(name)}, "
                f"and {snippet(name)} has changed since it was published, so it is not "
                "taken back",
                path=name,
                hint=f"keep or remove {name} yourself, then delete {stage}",
            )
        rename.between(parent_fd, name, stage_fd, name, allow_link=False)
    os.fsync(parent_fd)


def recover_group(parent: Pathish, key: str) -> list[str]:
    """Roll back the publications of ``key`` in ``parent`` whose process died before its
    commit point (module docstring); return the staging directories removed."""
    pattern = re.compile(re.escape(f".{key}{STAGING_INFIX}") + r"[0-9a-f]{16}")
    removed: list[str] = []
    parent_fd = _open_parent(parent)
    try:
        for stage in sorted(os.listdir(parent_fd)):
            if not pattern.fullmatch(stage):
                continue
            try:
                stage_fd = os.open(stage, _DIR, dir_fd=parent_fd)
            except OSError:
                continue
            try:
                try:
                    fcntl.flock(stage_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live publication owns it
                journal = _read_journal(stage_fd)
                if journal is not None:
                    _roll_back(parent_fd, stage, stage_fd, journal)
                shutil.rmtree(stage, dir_fd=parent_fd)
                os.fsync(parent_fd)
                removed.append(stage)
            finally:
                os.close(stage_fd)
    finally:
        os.close(parent_fd)
    return removed


def _make_stage(parent_fd: int, key: str) -> tuple[str, int]:
    """Create, lock, then name the staging directory (so no one sees it unlocked)."""
    token = secrets.token_hex(8)
    stage = f".{key}{STAGING_INFIX}{token}"
    provisional = f".{key}.creating-{token}"
    os.mkdir(provisional, 0o700, dir_fd=parent_fd)
    try:
        stage_fd = os.open(provisional, _DIR, dir_fd=parent_fd)
        fcntl.flock(stage_fd, fcntl.LOCK_EX)
        rename.between(parent_fd, provisional, parent_fd, stage, allow_link=False)
    except BaseException:
        with suppress(OSError):
            os.rmdir(provisional, dir_fd=parent_fd)
        raise
    return stage, stage_fd


def _write_journal(stage_fd: int, names: Sequence[str]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for name in names:
        try:
            entries[name] = _identity(stage_fd, name)
        except FileNotFoundError:
            raise PublishFailed(f"{snippet(name)} was not built in staging") from None
    data = dumps_canonical({"schema": _SCHEMA, "names": list(names), "entries": entries})
    if len(data) > MAX_COMMIT_JOURNAL_BYTES:
        raise PublishFailed(
            f"the commit journal would exceed MAX_COMMIT_JOURNAL_BYTES = {MAX_COMMIT_JOURNAL_BYTES}"
        )
    fd = os.open(JOURNAL, _NEW_FILE, 0o600, dir_fd=stage_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.fsync(stage_fd)
    return entries


def _commit(
    parent_fd: int,
    stage_fd: int,
    names: Sequence[str],
    published: dict[str, Any],
    before_commit: Callable[[], None] | None,
) -> None:
    entries = _write_journal(stage_fd, names)
    for name in names:
        try:
            rename.between(stage_fd, name, parent_fd, name, allow_link=False)
        except FileExistsError:
            raise TargetExists("the output appeared while publishing", path=name) from None
        except rename.Unsupported as exc:
            raise PublishFailed(
                f"this system has no no-replace rename ({exc}); refusing a method that could "
                "overwrite",
                path=name,
            ) from None
        published[name] = entries[name]
    os.fsync(parent_fd)
    if before_commit is not None:
        before_commit()
    os.unlink(JOURNAL, dir_fd=stage_fd)  # the commit point
    os.fsync(stage_fd)


@contextmanager
def staged_group(
    parent: Pathish,
    names: Sequence[str],
    *,
    key: str,
    before_commit: Callable[[], None] | None = None,
) -> Iterator[GroupStage]:
    """Build the entries ``names`` (single path components) in private staging; when the
    block ends, publish them into ``parent`` together (module docstring). An existing
    entry is ``target_exists`` and never touched; ``before_commit`` runs once they are all
    published, and a failure there takes them back."""
    for name in (key, *names):
        if len(validate_relative_path(name)) != 1:
            raise PublishFailed(f"{snippet(name)} is not a single path component")
    recover_group(parent, key)
    parent_fd = _open_parent(parent)
    try:
        for name in names:
            if os.path.lexists(os.path.join(os.fspath(parent), name)):
                raise TargetExists(
                    "the target already exists and is never replaced",
                    path=os.path.join(os.fspath(parent), name),
                )
        stage, stage_fd = _make_stage(parent_fd, key)
        published: dict[str, Any] = {}
        try:
            yield GroupStage(os.path.join(os.fspath(parent), stage))
            _commit(parent_fd, stage_fd, names, published, before_commit)
        except BaseException as exc:
            for name, identity in reversed(published.items()):
                with suppress(OSError):
                    info = os.lstat(name, dir_fd=parent_fd)
                    if (info.st_dev, info.st_ino) == (identity["dev"], identity["ino"]):
                        rename.between(parent_fd, name, stage_fd, name, allow_link=False)
            with suppress(OSError):
                os.fsync(parent_fd)
            _discard(parent_fd, stage)
            os.close(stage_fd)
            if isinstance(exc, OSError) and not isinstance(exc, KilnError):
                raise PublishFailed(f"publishing failed: {exc.strerror or exc}") from exc
            raise
        _discard(parent_fd, stage)
        os.close(stage_fd)  # releases the lock
    finally:
        os.close(parent_fd)


def _discard(parent_fd: int, stage: str) -> None:
    with suppress(OSError):
        shutil.rmtree(stage, dir_fd=parent_fd)
    with suppress(OSError):
        os.fsync(parent_fd)
