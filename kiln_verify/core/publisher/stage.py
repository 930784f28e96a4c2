"""Step 2: where each target is built before it is renamed into place.

A one-target publication (no ``force`` over an existing file) needs no journal: its entry
is built as the private sibling ``.NAME.incomplete-<token>`` and one no-replace rename
publishes it. A journaled publication builds its entries in one private staging directory
per parent directory, ``.KEY.staging-<token>`` (mode 0700; KEY: the caller's key or the
first target's name in that parent). Each is created as ``.KEY.creating-<token>``, locked
with ``flock`` (held until the end) and only then given its discoverable name, so a
staging directory whose lock is free always belongs to a process that has died.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from kiln_verify.core import rename
from kiln_verify.core.publisher.journal import NEW_FILE
from kiln_verify.core.publisher.targets import DIR_FLAGS, Slot
from kiln_verify.errors import PublishFailed, snippet

__all__ = ["Place", "Staging", "make_stage", "write_all"]

STAGING_INFIX = ".staging-"
CREATING_INFIX = ".creating-"
INCOMPLETE_INFIX = ".incomplete-"
REPLACED_INFIX = ".replaced-"


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


def make_stage(parent_fd: int, key: str, token: str) -> tuple[str, int]:
    """Create, lock, then name a staging directory (so no one sees it unlocked)."""
    stage = f".{key}{STAGING_INFIX}{token}"
    provisional = f".{key}{CREATING_INFIX}{token}"
    os.mkdir(provisional, 0o700, dir_fd=parent_fd)
    stage_fd = -1
    try:
        stage_fd = os.open(provisional, DIR_FLAGS, dir_fd=parent_fd)
        fcntl.flock(stage_fd, fcntl.LOCK_EX)
        try:
            rename.between(parent_fd, provisional, parent_fd, stage, allow_link=False)
        except rename.Unsupported:
            # The name is fresh (64 random bits) and a directory never replaces a
            # non-empty one: safe without RENAME_NOREPLACE.
            os.rename(provisional, stage, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        if stage_fd >= 0:
            os.close(stage_fd)
        with suppress(OSError):
            os.rmdir(provisional, dir_fd=parent_fd)
        raise
    return stage, stage_fd


@dataclass(slots=True)
class Place:
    """Where one target is built, and how the commit finds it from the parent."""

    slot: Slot
    dir_fd: int
    """The directory the entry is built in: a staging directory, or the parent itself."""
    name: str
    """The entry's name in ``dir_fd``."""
    via_parent: str
    """The entry's path relative to the parent (``STAGE/NAME`` or ``.NAME.incomplete-*``)."""
    staged: tuple[int, int] | None = None
    is_dir: bool = False
    set_aside: bool = False
    committed: bool = False

    @property
    def path(self) -> str:
        return os.path.join(self.slot.parent, self.via_parent)


class Staging:
    """What the caller's block builds in: every target's staging path, by index or name."""

    def __init__(self, places: list[Place], path: str | None, token: str) -> None:
        self._places = places
        self.path = path
        """The first staging directory (scratch space that goes with it), if journaled."""
        self.token = token

    def _place(self, which: int | str) -> Place:
        if isinstance(which, int):
            return self._places[which]
        for place in self._places:
            if place.slot.name == which:
                return place
        raise PublishFailed(f"{snippet(which)} is not a target of this publication")

    def entry(self, which: int | str) -> str:
        """The path at which to build target ``which`` (a target index or name)."""
        return self._place(which).path

    def location(self, which: int | str) -> tuple[int, str]:
        """``(directory descriptor, name)`` at which to build target ``which``."""
        place = self._place(which)
        return place.dir_fd, place.name

    def fill_file(self, which: int | str, mode: int, fill: Callable[[int], None]) -> None:
        """Create target ``which`` as a new file, let ``fill`` write it, fsync it."""
        dir_fd, name = self.location(which)
        fd = os.open(name, NEW_FILE, mode, dir_fd=dir_fd)
        try:
            fill(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
