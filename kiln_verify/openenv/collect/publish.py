"""Publish the three bundle files together or not at all.

The files are three separate paths, possibly in different directories, so no single
rename can publish them. The scheme (docs/contract.md, "Collection"):

1. **Check** every target before writing anything: the parent exists, is a directory and
   not a symlink (opened ``O_NOFOLLOW``); the target is absent, or (with ``force``) a
   regular non-symlink file. Without ``force`` an existing target is ``target_exists``.
2. **Stage** each file as a private sibling ``.NAME.incomplete-<hex>`` created with
   ``O_EXCL|O_NOFOLLOW``, fully written and fsynced. Its inode is remembered.
3. **Commit** in order: with ``force``, an existing target is first renamed aside to
   ``.NAME.replaced-<hex>`` (no-clobber); then the staged file is renamed onto the target
   with ``renameat2(RENAME_NOREPLACE)`` (:mod:`kiln_verify.core.rename`); every parent
   directory is fsynced.
4. **On any failure** (including ``KeyboardInterrupt``) the targets this run created are
   removed (only if the inode there is still the one we staged: a file that another
   process put there is never touched), every set-aside file is renamed back, and staging
   files are deleted; then the error propagates. Without ``force`` pre-existing files are
   never renamed, written or removed.
5. **On success** the journal is removed (the commit point), then the set-aside
   originals are deleted.

Between steps 2 and 3 a journal ``.NAME.commit-<token>`` (NAME: the first target) is
written, fsynced and locked (:mod:`kiln_verify.openenv.collect.journal`), so a process
killed outright between two renames leaves a state the next publication or target check
recognises and undoes before doing anything else: the files it staged are removed, the
originals it set aside are renamed back, and the run proceeds as if the interrupted one
had never started (a re-run succeeds; without ``--force`` it still never replaces a
complete bundle that was there before). A reader in the window sees some files of the new
bundle and not others; verification of such a mixture fails (the summary binds the other
files by digest), it never passes. A kill before the journal leaves only
``.NAME.incomplete-*`` staging residue, safe to delete; one after the commit point only
``.NAME.replaced-*`` originals, which were replaced and are safe to delete.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass

from kiln_verify.core import rename
from kiln_verify.errors import KilnError, PublishFailed, SymlinkRefused, TargetExists
from kiln_verify.openenv.collect import journal

__all__ = ["check_targets", "publish_together"]

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class _Target:
    shown: str
    parent: str
    name: str
    parent_fd: int
    staging: str
    aside: str
    existed: bool = False
    staged_inode: tuple[int, int] | None = None
    set_aside: bool = False
    committed: bool = False


def _open_target(path: str, force: bool, token: str | None = None) -> _Target:
    head, name = os.path.split(path.rstrip("/") or "/")
    if name in ("", ".", ".."):
        raise PublishFailed("the output path names no file", path=path)
    parent = head or "."
    try:
        info = os.lstat(parent)
    except FileNotFoundError:
        raise PublishFailed(
            "the parent directory does not exist", path=path, hint="create the directory first"
        ) from None
    if stat.S_ISLNK(info.st_mode):
        raise SymlinkRefused("the parent directory is a symbolic link", path=parent)
    if not stat.S_ISDIR(info.st_mode):
        raise PublishFailed("the parent is not a directory", path=parent)
    fd = os.open(parent, _DIR)
    token = token or secrets.token_hex(8)
    target = _Target(
        path, parent, name, fd, f".{name}.incomplete-{token}", f".{name}.replaced-{token}"
    )
    try:
        target.existed = _check_existing(target, force)
    except BaseException:
        os.close(fd)
        raise
    return target


def _check_existing(target: _Target, force: bool) -> bool:
    try:
        info = os.lstat(target.name, dir_fd=target.parent_fd)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise SymlinkRefused("the output target is a symbolic link", path=target.shown)
    if not force:
        raise TargetExists(
            "the output already exists and is never replaced without --force",
            path=target.shown,
            hint="choose another path or pass --force to replace every output file",
        )
    if not stat.S_ISREG(info.st_mode):
        raise PublishFailed("the output target exists and is not a regular file", path=target.shown)
    return True


def _stage(target: _Target, data: bytes, mode: int) -> None:
    fd = os.open(target.staging, _NEW_FILE, mode, dir_fd=target.parent_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        info = os.fstat(fd)
        target.staged_inode = (info.st_dev, info.st_ino)
    finally:
        os.close(fd)


def _commit(target: _Target) -> None:
    if target.existed:
        rename.noreplace(target.parent_fd, target.name, target.aside, allow_link=True)
        target.set_aside = True
    try:
        rename.noreplace(target.parent_fd, target.staging, target.name, allow_link=True)
    except FileExistsError:
        raise TargetExists("the output appeared while publishing", path=target.shown) from None
    target.committed = True


def _roll_back(target: _Target) -> None:
    if target.committed:
        with suppress(OSError):
            info = os.lstat(target.name, dir_fd=target.parent_fd)
            if (info.st_dev, info.st_ino) == target.staged_inode:
                os.unlink(target.name, dir_fd=target.parent_fd)
    if target.set_aside:
        with suppress(OSError):
            rename.noreplace(target.parent_fd, target.aside, target.name, allow_link=True)
    with suppress(OSError):
        os.unlink(target.staging, dir_fd=target.parent_fd)
    with suppress(OSError):
        os.fsync(target.parent_fd)


def check_targets(
    paths: Sequence[str | os.PathLike[str]], *, force: bool = False, create_parents: bool = False
) -> None:
    """Step 1 of :func:`publish_together` alone, before any work: every target passes
    exactly the checks (and gives exactly the errors) publication would, or this raises.

    ``create_parents``: a parent directory that does not exist yet is one the caller will
    create (``mkdir -p``); then its nearest existing ancestor must be a directory.
    """
    journal.recover([os.fspath(path) for path in paths])
    for path in paths:
        text = os.fspath(path)
        parent = os.path.dirname(text.rstrip("/")) or "."
        if create_parents and not os.path.lexists(parent):
            ancestor = parent
            while not os.path.lexists(ancestor):
                ancestor = os.path.dirname(ancestor) or "."
            if not os.path.isdir(ancestor):
                raise PublishFailed("a parent of the output is not a directory", path=ancestor)
            continue
        target = _open_target(text, force)
        os.close(target.parent_fd)


def publish_together(
    files: Sequence[tuple[str | os.PathLike[str], bytes]], *, force: bool = False, mode: int = 0o644
) -> None:
    """Create every ``(path, data)`` file, all or none (see the module docstring)."""
    journal.recover([os.fspath(path) for path, _ in files])
    targets: list[_Target] = []
    token = secrets.token_hex(8)
    written: journal.Journal | None = None
    try:
        for path, _ in files:
            targets.append(_open_target(os.fspath(path), force, token))
        for target, (_, data) in zip(targets, files, strict=True):
            _stage(target, data, mode)
        if targets:
            entries = [
                journal.entry(t.shown, t.staged_inode or (0, 0), len(data), t.existed)
                for t, (_, data) in zip(targets, files, strict=True)
            ]
            first = targets[0]
            written = journal.Journal(first.parent_fd, f".{first.name}.commit-{token}", entries)
        for target in targets:
            _commit(target)
        for target in targets:
            os.fsync(target.parent_fd)
        if written is not None:
            written.discard()  # the commit point
    except BaseException as exc:
        for target in reversed(targets):
            _roll_back(target)
        if written is not None:
            with suppress(OSError):
                written.discard()
        for target in targets:
            os.close(target.parent_fd)
        if isinstance(exc, OSError) and not isinstance(exc, KilnError):
            raise PublishFailed(f"publishing the bundle failed: {exc.strerror or exc}") from exc
        if isinstance(exc, rename.Unsupported):
            raise PublishFailed(
                f"this system has no no-replace rename ({exc}); refusing to risk overwriting"
            ) from None
        raise
    for target in targets:
        if target.set_aside:
            with suppress(OSError):
                os.unlink(target.aside, dir_fd=target.parent_fd)
        with suppress(OSError):
            os.fsync(target.parent_fd)
        os.close(target.parent_fd)
