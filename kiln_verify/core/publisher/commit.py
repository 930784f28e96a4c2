"""Steps 3-5: the commit, the rollback, and the publication every caller goes through.

:func:`publication` checks every target (:mod:`.targets`), recovers what a killed
publication of the same names left (:mod:`.recover`), gives the caller a place to build
each entry (:mod:`.stage`), and when the caller's block ends publishes them all:

1. with more than one target, a caller's ``key``, or ``force`` over an existing file,
   the journal is written and fsynced (:mod:`.journal`);
2. in order, each target: with ``force`` an existing original is first renamed aside to
   ``.NAME.replaced-<token>``; then the staged entry is renamed onto the target with
   ``renameat2(RENAME_NOREPLACE)`` (``replace``: one ``rename(2)`` over a regular file);
3. every parent directory is fsynced and ``before_commit`` (a re-verification) runs;
4. **the journal is removed: the commit point**; then the set-aside originals and the
   staging directories are deleted.

Any failure before the commit point, ``KeyboardInterrupt`` included, takes back every
entry this run published (only if it is still the entry staged: what another process put
there is never touched), renames every set-aside original back and removes the staging,
then the error propagates. A process killed outright leaves a state :mod:`.recover`
undoes, or after the commit point only residue that is safe to delete.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress

from kiln_verify.core import rename
from kiln_verify.core.publisher import journal, recover
from kiln_verify.core.publisher.stage import (
    INCOMPLETE_INFIX,
    REPLACED_INFIX,
    Place,
    Staging,
    make_stage,
)
from kiln_verify.core.publisher.targets import (
    TARGET,
    Pathish,
    Slot,
    Wording,
    existing,
    open_slot,
)
from kiln_verify.errors import KilnError, PublishFailed, TargetExists, snippet

__all__ = ["publication"]


class _Run:
    """One publication's state, from its checked targets to its commit or rollback."""

    def __init__(
        self, slots: list[Slot], *, journaled: bool, replace: bool, wording: Wording
    ) -> None:
        self.slots = slots
        self.token = secrets.token_hex(8)
        self.journaled = journaled
        self.replace = replace
        self.wording = wording
        self.places: list[Place] = []
        self.stages: list[tuple[int, str, int]] = []  # (parent fd, name, locked fd)
        self.parents: dict[tuple[int, int], int] = {}  # one descriptor per directory
        for slot in slots:
            info = os.fstat(slot.parent_fd)
            self.parents.setdefault((info.st_dev, info.st_ino), slot.parent_fd)

    def stage(self, key: str | None) -> Staging:
        by_parent: dict[int, tuple[str, int]] = {}
        for slot in self.slots:
            if not self.journaled:
                name = f".{slot.name}{INCOMPLETE_INFIX}{self.token}"
                self.places.append(Place(slot, slot.parent_fd, name, name))
                continue
            info = os.fstat(slot.parent_fd)
            fd = self.parents[(info.st_dev, info.st_ino)]
            if fd not in by_parent:
                stage_name, stage_fd = make_stage(fd, key or slot.name, self.token)
                key = None
                self.stages.append((fd, stage_name, stage_fd))
                by_parent[fd] = (stage_name, stage_fd)
            stage_name, stage_fd = by_parent[fd]
            via = f"{stage_name}/{slot.name}"
            self.places.append(Place(slot, stage_fd, slot.name, via))
        first = None
        if self.stages:
            first = os.path.join(self.slots[0].parent, self.stages[0][1])
        return Staging(self.places, first, self.token)

    def commit(self, before_commit: Callable[[], None] | None) -> None:
        records = []
        for place in self.places:
            try:
                info = os.lstat(place.name, dir_fd=place.dir_fd)
            except FileNotFoundError:
                shown = snippet(place.slot.name)
                raise PublishFailed(f"{shown} was not built in staging") from None
            place.staged = (info.st_dev, info.st_ino)
            place.is_dir = stat.S_ISDIR(info.st_mode)
            if self.journaled:
                identity = journal.identity(place.dir_fd, place.name)
                stage = os.path.abspath(os.path.dirname(place.path))
                slot = place.slot
                parent = os.path.abspath(slot.parent)
                records.append(journal.Record(parent, slot.name, identity, slot.existed, stage))
        if self.journaled:
            journal.write(self.stages[0][2], records)
        for place in self.places:
            self._rename(place)
        for fd in self.parents.values():
            os.fsync(fd)
        if before_commit is not None:
            before_commit()
        if self.journaled:
            os.unlink(journal.JOURNAL, dir_fd=self.stages[0][2])  # the commit point
            os.fsync(self.stages[0][2])

    def _rename(self, place: Place) -> None:
        slot = place.slot
        fd = slot.parent_fd
        if self.replace:
            existing(slot, force=True, wording=self.wording)  # still a regular file or absent
            os.rename(place.via_parent, slot.name, src_dir_fd=fd, dst_dir_fd=fd)
            place.committed = True
            return
        if slot.existed:
            aside = f".{slot.name}{REPLACED_INFIX}{self.token}"
            rename.noreplace(fd, slot.name, aside, allow_link=True)
            place.set_aside = True
        try:
            rename.noreplace(fd, place.via_parent, slot.name, allow_link=not place.is_dir)
        except FileExistsError:
            existing(slot, force=False, wording=self.wording)  # a symbolic link says so
            raise TargetExists(self.wording.appeared, path=slot.shown) from None
        place.committed = True

    def roll_back(self) -> None:
        """Take back what this run published, in reverse; never raises."""
        for place in reversed(self.places):
            slot = place.slot
            fd = slot.parent_fd
            if place.committed and not self.replace:
                with suppress(OSError, rename.Unsupported):
                    info = os.lstat(slot.name, dir_fd=fd)
                    if (info.st_dev, info.st_ino) != place.staged:
                        pass  # not ours (any more): never touched
                    elif place.is_dir:  # back into staging, atomically
                        rename.noreplace(fd, slot.name, place.via_parent, allow_link=False)
                    else:
                        os.unlink(slot.name, dir_fd=fd)
            if place.set_aside:
                with suppress(OSError, rename.Unsupported):
                    aside = f".{slot.name}{REPLACED_INFIX}{self.token}"
                    rename.noreplace(fd, aside, slot.name, allow_link=True)
        self._discard()

    def finish(self) -> None:
        """After the commit point: delete the originals set aside, then the staging."""
        for place in self.places:
            if place.set_aside:
                with suppress(OSError):
                    aside = f".{place.slot.name}{REPLACED_INFIX}{self.token}"
                    os.unlink(aside, dir_fd=place.slot.parent_fd)
        self._discard()

    def _discard(self) -> None:
        if not self.journaled:
            for place in self.places:
                with suppress(OSError):
                    recover.remove_entry(place.slot.parent_fd, place.name)
            return
        for parent_fd, stage_name, _ in reversed(self.stages):  # the journal's last
            with suppress(OSError):
                shutil.rmtree(stage_name, dir_fd=parent_fd)
            with suppress(OSError):
                os.fsync(parent_fd)

    def close(self) -> None:
        for _, _, stage_fd in self.stages:
            os.close(stage_fd)  # releases the lock
        for slot in self.slots:
            os.close(slot.parent_fd)


def _translate(exc: BaseException, run: _Run) -> BaseException:
    if isinstance(exc, KilnError):
        return exc
    shown = run.slots[0].shown if len(run.slots) == 1 else None
    if isinstance(exc, rename.Unsupported):
        return PublishFailed(
            f"this system has no no-replace rename ({exc}); refusing a method that could overwrite",
            path=shown,
        )
    if isinstance(exc, OSError):
        return PublishFailed(f"{run.wording.failed}: {exc.strerror or exc}", path=shown)
    return exc


@contextmanager
def publication(
    paths: Sequence[Pathish],
    *,
    force: bool = False,
    replace: bool = False,
    key: str | None = None,
    before_commit: Callable[[], None] | None = None,
    recover_first: bool = True,
    wording: Wording = TARGET,
) -> Iterator[Staging]:
    """Build every target of ``paths`` in the block, then publish them all or none.

    ``force``: existing regular files are replaced (set aside until the commit point).
    ``replace``: one target, atomically replaced by ``rename(2)`` (state files).
    ``key``: names the first staging directory (a publication always journaled).
    ``recover_first=False`` skips the scan for leftovers (publications of names that
    are never journaled). See the module docstring for the protocol.
    """
    if replace and len(paths) != 1:
        raise PublishFailed("an atomic replacement publishes exactly one target")
    if recover_first:
        recover.recover(paths, key=key)
    slots: list[Slot] = []
    try:
        for path in paths:
            slots.append(open_slot(path, force=force or replace, wording=wording))
    except BaseException:
        for slot in slots:
            os.close(slot.parent_fd)
        raise
    journaled = key is not None or len(slots) > 1 or (force and any(s.existed for s in slots))
    run = _Run(slots, journaled=journaled and not replace, replace=replace, wording=wording)
    try:
        try:
            staging = run.stage(key)
            yield staging
            run.commit(before_commit)
        except BaseException as exc:
            run.roll_back()
            translated = _translate(exc, run)
            if translated is exc:
                raise
            raise translated from exc
        run.finish()
    finally:
        run.close()
