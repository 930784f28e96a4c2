"""Step 1 of every publication: each target is checked before anything is written.

The parent must exist, be a directory and not a symbolic link; it is opened
``O_NOFOLLOW`` and every later step works relative to that descriptor, so renaming the
parent mid-way cannot redirect a write. The target must be absent, or (with ``force`` or
``replace``) a regular non-symlink file. The wording of the refusals differs between the
bundle's ``--force``-able outputs and the other publications, so it is passed in.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from kiln_verify.errors import PublishFailed, SymlinkRefused, TargetExists, snippet

__all__ = ["OUTPUT", "TARGET", "Pathish", "Slot", "Wording", "check_paths", "open_slot"]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
Pathish = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class Wording:
    """How refusals read to the caller's user (their codes never depend on it)."""

    noun: str
    exists: str
    exists_hint: str | None
    missing_hint: str | None
    names_nothing: str | None
    appeared: str
    failed: str


TARGET = Wording(
    noun="target",
    exists="the target already exists and is never replaced",
    exists_hint=None,
    missing_hint=None,
    names_nothing=None,
    appeared="the target appeared while publishing",
    failed="write failed",
)
"""Outputs that are never replaced (exports, reports, run directories, step bundles)."""

OUTPUT = Wording(
    noun="output target",
    exists="the output already exists and is never replaced without --force",
    exists_hint="choose another path or pass --force to replace every output file",
    missing_hint="create the directory first",
    names_nothing="the output path names no file",
    appeared="the output appeared while publishing",
    failed="publishing the bundle failed",
)
"""A bundle's files and receipts, which ``--force`` may replace."""


@dataclass(slots=True)
class Slot:
    """One checked target: its parent's descriptor and what was there."""

    shown: str
    parent: str
    name: str
    parent_fd: int
    existed: bool


def split(path: Pathish, wording: Wording) -> tuple[str, str, str]:
    """``(shown, parent, name)`` of a target path."""
    shown = os.fspath(path)
    head, name = os.path.split(shown.rstrip("/") or "/")
    if name in ("", ".", ".."):
        rule = wording.names_nothing or f"{snippet(shown)} names no directory entry"
        raise PublishFailed(rule, path=shown)
    return shown, head or ".", name


def open_parent(parent: str, shown: str, wording: Wording) -> int:
    try:
        info = os.lstat(parent)
    except FileNotFoundError:
        raise PublishFailed(
            "the parent directory does not exist", path=shown, hint=wording.missing_hint
        ) from None
    if stat.S_ISLNK(info.st_mode):
        raise SymlinkRefused("the parent directory is a symbolic link", path=parent)
    if not stat.S_ISDIR(info.st_mode):
        raise PublishFailed("the parent is not a directory", path=parent)
    try:
        return os.open(parent, DIR_FLAGS)
    except OSError as exc:
        raise PublishFailed(
            f"cannot open the parent directory: {exc.strerror}", path=parent
        ) from None


def existing(slot: Slot, *, force: bool, wording: Wording) -> bool:
    """Whether a (replaceable) target is there; raises for one that may not be touched."""
    try:
        info = os.lstat(slot.name, dir_fd=slot.parent_fd)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise SymlinkRefused(f"the {wording.noun} is a symbolic link", path=slot.shown)
    if not force:
        raise TargetExists(wording.exists, path=slot.shown, hint=wording.exists_hint)
    if not stat.S_ISREG(info.st_mode):
        raise PublishFailed(f"the {wording.noun} exists and is not a regular file", path=slot.shown)
    return True


def open_slot(path: Pathish, *, force: bool, wording: Wording) -> Slot:
    """Check one target and keep its parent open (the caller closes ``parent_fd``)."""
    shown, parent, name = split(path, wording)
    fd = open_parent(parent, shown, wording)
    slot = Slot(shown, parent, name, fd, False)
    try:
        slot.existed = existing(slot, force=force, wording=wording)
    except BaseException:
        os.close(fd)
        raise
    return slot


def check_paths(
    paths: Sequence[Pathish], *, force: bool, create_parents: bool, wording: Wording
) -> None:
    """Every target passes exactly the checks publication makes, or this raises.

    ``create_parents``: a parent that does not exist yet is one the caller will create
    (``mkdir -p``); then its nearest existing ancestor must be a directory.
    """
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
        os.close(open_slot(text, force=force, wording=wording).parent_fd)
