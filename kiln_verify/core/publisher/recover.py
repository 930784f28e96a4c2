"""Crash recovery: undo what a publication killed before its commit point left behind.

Every journaled publication and every target check first looks beside each target for
staging directories ``.NAME.staging-<token>`` (and the old ``.NAME.commit-<token>``
journals) whose lock it can take: their writer is dead. A journal there is undone, in
reverse order, target by target:

- a target that is still exactly the entry the journal recorded is taken back (a file is
  unlinked; a directory is first renamed to a private name, then removed);
- an original set aside as ``.NAME.replaced-<token>`` is renamed back;
- staging residue ``.NAME.incomplete-<token>`` is deleted.

It never touches what it did not publish. A target that is the published entry but has
changed since (a file appended to, a bundle given a new file) is ``target_exists``, and
so is a foreign entry holding the name a set-aside original must go back to; both are
checked for every target before anything changes, so a refusal changes nothing. A
staging directory without a journal never published anything and is removed; so are
the other staging directories a journal names.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
from collections.abc import Sequence
from contextlib import suppress

from kiln_verify.core import rename
from kiln_verify.core.publisher import journal
from kiln_verify.core.publisher.stage import INCOMPLETE_INFIX, REPLACED_INFIX
from kiln_verify.core.publisher.targets import DIR_FLAGS, Pathish
from kiln_verify.errors import TargetExists, snippet

__all__ = ["recover", "recover_group", "remove_entry"]

_LEFTOVER = re.compile(r"\.(.+)\.(staging|commit)-([0-9a-f]{16})")


def remove_entry(dir_fd: int, name: str) -> None:
    """Delete a file or a whole directory tree (absent is fine)."""
    try:
        info = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _undo(record: journal.Record, token: str, label: str, *, dry: bool) -> None:
    """Undo one target's part of the commit; ``dry``: only check that it can be undone."""
    try:
        parent_fd = os.open(record.parent, DIR_FLAGS)
    except OSError:
        return
    try:
        name = record.name
        aside = f".{name}{REPLACED_INFIX}{token}"
        try:
            info = os.lstat(name, dir_fd=parent_fd)
        except FileNotFoundError:
            info = None
        ours = False
        if info is not None:
            recorded = (record.identity.get("dev"), record.identity.get("ino"))
            if (info.st_dev, info.st_ino) == recorded:
                ours = journal.identity(parent_fd, name) == record.identity
                if not ours:
                    raise TargetExists(
                        f"an interrupted publication left {snippet(label)} beside "
                        f"{snippet(name)}, and {snippet(name)} has changed since it was "
                        "published, so it is not taken back",
                        path=record.path,
                        hint=f"keep or remove {name} yourself, then delete {label}",
                    )
            elif record.existed and os.path.lexists(os.path.join(record.parent, aside)):
                raise TargetExists(
                    f"an interrupted publication set the original {snippet(name)} aside as "
                    f"{snippet(aside)}, and another file now holds its name",
                    path=record.path,
                    hint=f"keep one of {name} and {aside} yourself",
                )
        if dry:
            return
        residue = f".{name}{INCOMPLETE_INFIX}{token}"
        if ours and info is not None and stat.S_ISDIR(info.st_mode):
            remove_entry(parent_fd, residue)
            rename.noreplace(parent_fd, name, residue, allow_link=False)  # atomically gone
        elif ours:
            os.unlink(name, dir_fd=parent_fd)
        if record.existed:
            with suppress(FileNotFoundError):
                rename.noreplace(parent_fd, aside, name, allow_link=True)
        remove_entry(parent_fd, residue)
        os.fsync(parent_fd)
    finally:
        os.close(parent_fd)


def undo(records: Sequence[journal.Record], token: str, label: str) -> None:
    """Refuse before changing anything, then undo every target (reverse order)."""
    for dry in (True, False):
        for record in reversed(records):
            _undo(record, token, label, dry=dry)


def _recover_stage(parent: str, parent_fd: int, stage: str, token: str) -> bool:
    try:
        stage_fd = os.open(stage, DIR_FLAGS, dir_fd=parent_fd)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(stage_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live publication owns it
        here = os.path.join(parent, stage)
        records = journal.read(stage_fd, here)
        if records:
            undo(records, token, stage)
            for other in sorted({r.stage for r in records if r.stage and r.stage != here}):
                _remove_sibling_stage(other, token)
        shutil.rmtree(stage, dir_fd=parent_fd)
        os.fsync(parent_fd)
        return True
    finally:
        os.close(stage_fd)


def _remove_sibling_stage(path: str, token: str) -> None:
    """Remove another staging directory of the same dead publication: only a directory
    named ``.NAME.staging-<the same token>`` whose lock is free (a journal names it, and
    a journal is never trusted to name anything else)."""
    parent, name = os.path.split(path)
    found = _LEFTOVER.fullmatch(name)
    if found is None or found[2] != "staging" or found[3] != token:
        return
    try:
        parent_fd = os.open(parent, DIR_FLAGS)
    except OSError:
        return
    try:
        stage_fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
        try:
            fcntl.flock(stage_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(name, dir_fd=parent_fd)
            os.fsync(parent_fd)
        finally:
            os.close(stage_fd)
    except OSError:
        pass  # gone already, or held: then it is not what the journal named
    finally:
        os.close(parent_fd)


def _recover_together(parent_fd: int, name: str, token: str) -> None:
    """An old ``.NAME.commit-<token>`` journal (the bundle publisher before 909997b)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a live publication
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        undo(journal.read_together(fd) or [], token, name)
        os.unlink(name, dir_fd=parent_fd)
        os.fsync(parent_fd)
    finally:
        os.close(fd)


def recover(paths: Sequence[Pathish], *, key: str | None = None) -> list[str]:
    """Undo every dead writer's uncommitted publication beside ``paths`` (and the
    staging directories of ``key`` beside the first); return the staging removed."""
    wanted: dict[str, set[str]] = {}
    for path in paths:
        parent, name = os.path.split(os.path.abspath(os.fspath(path)))
        wanted.setdefault(parent, set()).add(name)
    if key is not None and wanted:
        wanted[next(iter(wanted))].add(key)
    removed: list[str] = []
    for parent, names in wanted.items():
        try:
            parent_fd = os.open(parent, DIR_FLAGS)
        except OSError:
            continue  # checked (and reported) by the caller
        try:
            for candidate in sorted(os.listdir(parent_fd)):
                found = _LEFTOVER.fullmatch(candidate)
                if found is None or found[1] not in names:
                    continue
                if found[2] == "commit":
                    _recover_together(parent_fd, candidate, found[3])
                elif _recover_stage(parent, parent_fd, candidate, found[3]):
                    removed.append(candidate)
        finally:
            os.close(parent_fd)
    return removed


def recover_group(parent: Pathish, key: str) -> list[str]:
    """:func:`recover` of the staging directories ``.KEY.staging-*`` in ``parent``."""
    return recover([os.path.join(os.fspath(parent), key)])
