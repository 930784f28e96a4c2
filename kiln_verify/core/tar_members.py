"""Which members an archive may hold: names, the single root, the budgets, the layout.

Every header passes :meth:`MemberGate.admit` before a byte of its data is read or
written, in both passes of an extraction: the name must follow the artifact path rules
under exactly one root, the entry count and the declared sizes must stay within the
:class:`~kiln_verify.core.tar_contract.ArchiveLimits`, the caller's
:class:`~kiln_verify.core.tar_contract.MemberRules` must accept it, and it must not
collide with an earlier name (duplicates, Unicode case-folded aliases, a file that is also
a directory), so an archive that would collide on a case-insensitive or normalizing file
system is refused everywhere. Budgets are checked from the header, so a bomb is refused
before it is inflated. The rules and codes are in docs/byte-rules.md, section "Archives".
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from kiln_verify.core.paths import validate_relative_path
from kiln_verify.core.tar_contract import ArchiveLimits, MemberRules
from kiln_verify.core.tar_stream import Header
from kiln_verify.errors import (
    ArchiveBomb,
    ArchiveDuplicate,
    ArchiveInvalid,
    ArchivePathUnsafe,
    ArchiveRootInvalid,
    PathInvalid,
    snippet,
)


def _fold(parts: tuple[str, ...]) -> str:
    return unicodedata.normalize("NFC", "/".join(parts)).casefold()


class Layout:
    """Names seen so far: rejects duplicates, case-folded aliases and file/dir clashes."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[str, ...], bool]] = {}  # folded -> (parts, is_dir)
        self._explicit: set[str] = set()

    def add(self, parts: tuple[str, ...], is_dir: bool) -> list[tuple[str, ...]]:
        """Record ``parts``; return the implied parent directories that are new."""
        new_dirs: list[tuple[str, ...]] = []
        for depth in range(1, len(parts) + 1):
            prefix = parts[:depth]
            leaf = depth == len(parts)
            key = _fold(prefix)
            shown = snippet("/".join(prefix))
            known = self._seen.get(key)
            if known is None:
                self._seen[key] = (prefix, is_dir or not leaf)
                if not leaf:
                    new_dirs.append(prefix)
                continue
            known_parts, known_dir = known
            if known_parts != prefix:
                raise ArchiveDuplicate(
                    f"{shown} and {snippet('/'.join(known_parts))} are the same name after "
                    "case folding"
                )
            if not leaf:
                if not known_dir:
                    raise ArchiveDuplicate(f"{shown} is both a file and a directory")
                continue
            if known_dir != is_dir:
                raise ArchiveDuplicate(f"{shown} is both a file and a directory")
            if not is_dir or key in self._explicit:
                raise ArchiveDuplicate(f"{shown} appears more than once")
        if is_dir:
            self._explicit.add(_fold(parts))
        return new_dirs


@dataclass(frozen=True, slots=True)
class Member:
    """An admitted member: where it goes and which implied parents it creates."""

    parts: tuple[str, ...]  # the archive name's components, the root first
    relative: str  # the name beneath the root ("" for the root itself)
    is_dir: bool
    new_dirs: list[tuple[str, ...]]  # implied parent directories not seen before


class MemberGate:
    """The checks of every header of one pass, with that pass's running budgets."""

    def __init__(self, root: str, limits: ArchiveLimits, rules: MemberRules | None) -> None:
        self._root = root
        self._limits = limits
        self._rules = rules
        self._layout = Layout()
        self.entries = 0
        self._expanded = 0

    def admit(self, header: Header) -> Member:
        """Raise unless this member can belong; count it against the budgets."""
        is_dir = header.is_dir
        name = header.name[:-1] if is_dir and header.name.endswith("/") else header.name
        try:
            parts = validate_relative_path(name)
        except PathInvalid as exc:
            raise ArchivePathUnsafe(f"member {snippet(header.name)}: {exc.rule}") from None
        if parts[0] != self._root:
            raise ArchiveRootInvalid(
                f"member {snippet(header.name)} is not under the single root "
                f"{snippet(self._root + '/')}"
            )
        if len(parts) == 1 and not is_dir:
            raise ArchiveRootInvalid(f"the root {snippet(self._root)} is not a directory")
        self.entries += 1
        if self.entries > self._limits.max_entries:
            raise ArchiveBomb(f"more than {self._limits.max_entries} entries (MAX_ARCHIVE_ENTRIES)")
        if is_dir and header.size:
            raise ArchiveInvalid(f"directory {snippet(header.name)} has a non-zero size")
        if header.size > self._limits.max_member_bytes:
            raise ArchiveBomb(
                f"member {snippet(header.name)} declares {header.size} bytes, more than "
                f"{self._limits.max_member_bytes} (MAX_ARCHIVE_MEMBER_BYTES)"
            )
        self._expanded += header.size
        if self._expanded > self._limits.max_expanded_bytes:
            raise ArchiveBomb(
                f"members declare more than {self._limits.max_expanded_bytes} bytes in all "
                "(MAX_ARCHIVE_EXPANDED_BYTES)"
            )
        relative = "/".join(parts[1:])
        if self._rules is not None:
            self._rules.check(relative, is_dir, header.size)
        new_dirs = self._layout.add(parts, is_dir)
        return Member(parts, relative, is_dir, new_dirs)


__all__ = ["Layout", "Member", "MemberGate"]
