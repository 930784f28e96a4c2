"""The collection journal on disk: framed, fsynced, digest-chained entries (``--journal``).

A journal is a directory of entry files, each written whole: staged as ``.NAME.partial``,
fsynced, renamed into place without replacing anything and the directory fsynced, so a
crash (SIGKILL, power loss) leaves every entry either complete or absent, never short.
Names: ``header.entry`` (:class:`~kiln_verify.openenv.records.journal.JournalHeader`),
``group-NNNNNNNN.entry`` for group ``N`` of the plan (:class:`JournalGroup`), and
``seal.entry`` (:class:`JournalSeal`). A ``.partial`` file is what a killed write left; it
is ignored, and removed by the next writer.

An entry file is ``sha256:<hex of the payload>`` LF, then the payload: the record as
compact JSON (its layout written by ``orjson``, else pydantic's writer) and LF. Group
entries and the seal name the previous entry's digest. Reading (:func:`read_journal`)
refuses a short entry (``journal_entry_truncated``); a digest, a link or a record that
disagrees (``journal_entry_tampered``); and a directory that is not a journal or has a gap
(``journal_invalid``). Every entry is charged to a retained budget
(``MAX_RETAINED_BYTES``) from its size before it is read.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from kiln_verify.core import rename
from kiln_verify.core.digest import Sha256Digest, sha256_bytes
from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.publisher import write_all
from kiln_verify.errors import (
    JournalEntryTampered,
    JournalEntryTruncated,
    JournalInvalid,
    KilnError,
)
from kiln_verify.limits import MAX_RETAINED_BYTES
from kiln_verify.openenv.collect.plan import RetainedBudget
from kiln_verify.openenv.records.journal import (
    JOURNAL_SEAL_SCHEMA,
    JournalGroup,
    JournalHeader,
    JournalSeal,
)
from kiln_verify.openenv.records.writefast import record_compact_unproven
from kiln_verify.records import Record, validate_record

__all__ = [
    "HEADER",
    "SEAL",
    "EntryDirectory",
    "JournalFiles",
    "JournalWriter",
    "entry_name",
    "frame",
    "only_leftovers",
    "read_journal",
    "store_entry",
    "unframe",
]

HEADER: Final = "header.entry"
SEAL: Final = "seal.entry"
_GROUP = re.compile(r"group-([0-9]{8})\.entry")
_PARTIAL = re.compile(r"\.[a-z0-9-]+\.entry\.partial")
_DIGEST_LINE: Final = len("sha256:") + 64 + 1
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_HEX: Final = frozenset(b"0123456789abcdef")
R = TypeVar("R", bound=Record)


def entry_name(group_index: int) -> str:
    """The file name of group ``group_index``'s entry."""
    return f"group-{group_index:08d}.entry"


def frame(record: Record, given: Mapping[str, Any] | None = None) -> tuple[bytes, Sha256Digest]:
    """An entry file's bytes and its digest (the payload's SHA-256); a member named in
    ``given`` is that value already written (``record_compact_unproven``)."""
    # The entry is read back as records, never compared as text, so it needs no canonical
    # spelling, only an exact round trip: ``orjson`` from the record's layout (a third of
    # pydantic's writer's cost, whose serializers call back into Python for every
    # free-form value), pydantic's writer for a record the layout does not write.
    payload = record_compact_unproven(record, given)
    if payload is None:
        payload = record.model_dump_json(by_alias=True).encode("utf-8")
    payload += b"\n"
    digest = sha256_bytes(payload)
    return str(digest).encode("ascii") + b"\n" + payload, digest


def unframe(data: bytes, model: type[R], *, source: str) -> tuple[R, Sha256Digest]:
    """The record an entry file holds and its digest, or the typed refusal."""
    if not data.endswith(b"\n") or len(data) <= _DIGEST_LINE:
        raise JournalEntryTruncated("the entry ends before its last byte", path=source)
    head, payload = data[: _DIGEST_LINE - 1], data[_DIGEST_LINE:]
    if (
        data[_DIGEST_LINE - 1] != 0x0A
        or not head.startswith(b"sha256:")
        or not _HEX.issuperset(head[7:])
    ):
        raise JournalEntryTampered("the entry does not start with its digest line", path=source)
    digest = sha256_bytes(payload)
    if str(digest).encode("ascii") != head:
        raise JournalEntryTampered("the entry's payload does not match its digest", path=source)
    try:
        value = loads_object(payload[:-1], max_bytes=len(payload), source=source)
        record = validate_record(model, value, source=source)
    except KilnError as exc:
        raise JournalEntryTampered(
            f"the entry's digest matches but its record is not a {model.__name__} "
            f"({exc.code}: {exc.rule})",
            path=source,
        ) from None
    return record, digest


@dataclass(frozen=True, slots=True)
class JournalFiles:
    """A journal as read: its header, its chained groups (in plan order), its seal."""

    path: Path
    header: JournalHeader
    groups: tuple[JournalGroup, ...]
    seal: JournalSeal | None
    last_sha256: Sha256Digest
    size: int
    """The entries' bytes, all together."""

    @property
    def next_group(self) -> int:
        return self.header.groups_start + len(self.groups)


def only_leftovers(path: Path) -> bool:
    """Whether the directory holds nothing but what killed writes left (``.partial``)."""
    return all(_PARTIAL.fullmatch(entry.name) for entry in path.iterdir())


def _open_dir(path: Path) -> int:
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        raise JournalInvalid(
            f"cannot open the journal directory: {exc.strerror}", path=str(path)
        ) from None


def _read_entry(dir_fd: int, name: str, path: Path, budget: RetainedBudget) -> bytes:
    shown = str(path / name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise JournalInvalid(f"cannot open a journal entry: {exc.strerror}", path=shown) from None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise JournalInvalid("a journal entry is not a regular file", path=shown)
        budget.charge_bytes(info.st_size, f"journal entry {name}")
        data = stream.read(info.st_size + 1)
    if len(data) != info.st_size:
        raise JournalInvalid("a journal entry changed while it was read", path=shown)
    return data


def _listing(dir_fd: int, path: Path) -> tuple[bool, list[int], bool]:
    """Whether the header is there, the group indices present (sorted), whether sealed."""
    header = sealed = False
    indices: list[int] = []
    for name in os.listdir(dir_fd):
        if name == HEADER:
            header = True
        elif name == SEAL:
            sealed = True
        elif match := _GROUP.fullmatch(name):
            indices.append(int(match.group(1)))
        elif not _PARTIAL.fullmatch(name):
            raise JournalInvalid(
                f"the journal holds a file it never writes: {name!r}", path=str(path)
            )
    return header, sorted(indices), sealed


def read_journal(
    path: str | os.PathLike[str], budget: RetainedBudget | None = None
) -> JournalFiles:
    """Read and check a whole journal: framing, digests, the chain, contiguous groups."""
    root = Path(path)
    budget = budget if budget is not None else RetainedBudget(MAX_RETAINED_BYTES)
    used = budget.used
    dir_fd = _open_dir(root)
    try:
        has_header, indices, sealed = _listing(dir_fd, root)
        if not has_header:
            raise JournalInvalid("the directory holds no journal header", path=str(root))
        header, last = unframe(
            _read_entry(dir_fd, HEADER, root, budget), JournalHeader, source=str(root / HEADER)
        )
        start, stop = header.groups_start, header.groups_stop
        if not start < stop:
            raise JournalEntryTampered("the header's group range is empty", path=str(root / HEADER))
        expected = list(range(start, start + len(indices)))
        if indices != expected or len(indices) > stop - start:
            raise JournalInvalid(
                f"the journal's group entries are not groups {start}.. in a row without a "
                f"gap inside [{start}, {stop})",
                path=str(root),
            )
        groups: list[JournalGroup] = []
        for index in indices:
            name = entry_name(index)
            shown = str(root / name)
            group, digest = unframe(
                _read_entry(dir_fd, name, root, budget), JournalGroup, source=shown
            )
            if group.group_index != index or group.previous_sha256 != str(last):
                raise JournalEntryTampered(
                    "the entry is not linked to the entry before it (group index or "
                    "previous_sha256)",
                    path=shown,
                )
            groups.append(group)
            last = digest
        seal: JournalSeal | None = None
        if sealed:
            shown = str(root / SEAL)
            seal, digest = unframe(
                _read_entry(dir_fd, SEAL, root, budget), JournalSeal, source=shown
            )
            if (
                seal.previous_sha256 != str(last)
                or (seal.groups_start, seal.groups_stop) != (start, stop)
                or len(groups) != stop - start
            ):
                raise JournalEntryTampered(
                    "the seal does not close this journal's whole range", path=shown
                )
            last = digest
        return JournalFiles(root, header, tuple(groups), seal, last, budget.used - used)
    finally:
        os.close(dir_fd)


def _write_entry(path: Path, budget: RetainedBudget, name: str, record: Record) -> Sha256Digest:
    """Frame one entry, charge it and store it (:func:`store_entry`)."""
    data, digest = frame(record)
    budget.charge_bytes(len(data), f"journal entry {name}")
    store_entry(path, name, data)
    return digest


class EntryDirectory:
    """A journal directory held open while entries are written into it, each one whole:
    staged, fsynced, renamed without replacing, the directory fsynced. What killed writers
    left (``.partial`` files) is removed once, when it is opened (``clear=False``: each
    store removes only the one it would write over). A failure removes the staged file;
    only a killed writer leaves one. System calls only (the GIL is released while they
    wait): a worker thread may store entries. One descriptor serves a whole run's entries
    (opening the directory and looking for a leftover for each entry cost a quarter of an
    entry's CPU)."""

    def __init__(self, path: Path, *, clear: bool = True) -> None:
        self.path = path
        self._fd = _open_dir(path)
        self._cleared = clear
        if not clear:
            return
        try:
            for name in os.listdir(self._fd):
                if _PARTIAL.fullmatch(name):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=self._fd)
        except OSError as exc:
            os.close(self._fd)
            raise JournalInvalid(
                f"cannot clear the journal's leftovers: {exc.strerror}", path=str(path)
            ) from None

    def store(self, name: str, data: bytes) -> None:
        """Write one framed entry whole and durable."""
        partial = f".{name}.partial"
        try:
            if not self._cleared:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(partial, dir_fd=self._fd)  # a killed writer's leftover
            fd = os.open(partial, _NEW, 0o600, dir_fd=self._fd)
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            rename.noreplace(self._fd, partial, name, allow_link=True)
            os.fsync(self._fd)
        except (OSError, rename.Unsupported) as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial, dir_fd=self._fd)
            if isinstance(exc, FileExistsError):
                raise JournalInvalid(
                    f"journal entry {name} already exists (another collector writes this journal?)",
                    path=str(self.path),
                ) from None
            why = exc.strerror if isinstance(exc, OSError) else "no rename that refuses to replace"
            raise JournalInvalid(
                f"cannot write journal entry {name}: {why}", path=str(self.path)
            ) from None

    def close(self) -> None:
        os.close(self._fd)


def store_entry(path: Path, name: str, data: bytes) -> None:
    """Write one framed entry whole (:meth:`EntryDirectory.store`), removing a killed
    writer's staged file of that entry first (only that one: a writer appending entry by
    entry must not list the whole journal for each)."""
    directory = EntryDirectory(path, clear=False)
    try:
        directory.store(name, data)
    finally:
        directory.close()


class JournalWriter:
    """Appends entries to a journal directory, each one whole and durable before the next.

    The bytes written are charged to their own retained budget (``MAX_RETAINED_BYTES``):
    a journal never outgrows what a collection may hold in memory.
    """

    def __init__(self, path: Path, last: Sha256Digest, budget: RetainedBudget) -> None:
        self.path = path
        self.last = last
        self._budget = budget

    @classmethod
    def create(cls, path: str | os.PathLike[str], header: JournalHeader) -> JournalWriter:
        """A new journal: the directory is made (it may exist only empty) and the header
        written."""
        writer, (name, data) = cls.begin(path, header)
        store_entry(writer.path, name, data)
        return writer

    @classmethod
    def begin(
        cls, path: str | os.PathLike[str], header: JournalHeader
    ) -> tuple[JournalWriter, tuple[str, bytes]]:
        """:meth:`create` without the header's write: the directory made, the header
        framed, charged and chained; :func:`store_entry` must write it before any other
        entry (a journal without its header was never started)."""
        root = Path(path)
        try:
            root.mkdir(mode=0o700)
        except FileExistsError:
            if not root.is_dir() or root.is_symlink() or not only_leftovers(root):
                raise JournalInvalid(
                    "the journal directory exists and is not empty", path=str(root)
                ) from None
        except OSError as exc:
            raise JournalInvalid(
                f"cannot create the journal directory: {exc.strerror}", path=str(root)
            ) from None
        data, digest = frame(header)
        budget = RetainedBudget(MAX_RETAINED_BYTES)
        budget.charge_bytes(len(data), f"journal entry {HEADER}")
        return cls(root, digest, budget), (HEADER, data)

    @classmethod
    def resume(cls, files: JournalFiles) -> JournalWriter:
        """A writer that continues a journal read by :func:`read_journal`."""
        budget = RetainedBudget(MAX_RETAINED_BYTES)
        budget.used = files.size  # the journal as a whole stays within the bound
        return cls(files.path, files.last_sha256, budget)

    def _write(self, name: str, record: Record) -> Sha256Digest:
        return _write_entry(self.path, self._budget, name, record)

    def append(self, group: JournalGroup) -> None:
        """Write one finished group (its ``previous_sha256`` must be :attr:`last`)."""
        self.last = self._write(entry_name(group.group_index), group)

    def prepare(
        self, group: JournalGroup, given: Mapping[str, Any] | None = None
    ) -> tuple[str, bytes]:
        """:meth:`append` without the write: the entry framed, charged and chained (it is
        :attr:`last` from now on); :func:`store_entry` must write it before the next.
        ``given``: members already written (:func:`frame`)."""
        data, digest = frame(group, given)
        name = entry_name(group.group_index)
        self._budget.charge_bytes(len(data), f"journal entry {name}")
        self.last = digest
        return name, data

    def seal(self, start: int, stop: int) -> None:
        """Close the range: every group written, every environment revalidated."""
        self.last = self._write(
            SEAL,
            JournalSeal(
                schema=JOURNAL_SEAL_SCHEMA,
                groups_start=start,
                groups_stop=stop,
                previous_sha256=str(self.last),
            ),
        )
