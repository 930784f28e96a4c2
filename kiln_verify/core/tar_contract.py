"""What an archive may be: its budgets, a caller's member rules, the fixed modes and root.

The writer (:mod:`kiln_verify.core.tar_write`) and the extractor
(:mod:`kiln_verify.core.safe_tar`) share these, so the writer can never produce an archive
the reader refuses: both apply the same :class:`ArchiveLimits`, the same single-component
root rule and the same modes. The rules, their codes and the reasons are in
docs/byte-rules.md, section "Archives".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from kiln_verify.core.paths import validate_relative_path
from kiln_verify.errors import PathInvalid, UsageError, snippet
from kiln_verify.limits import (
    MAX_ARCHIVE_COMPRESSED_BYTES,
    MAX_ARCHIVE_ENTRIES,
    MAX_ARCHIVE_EXPANDED_BYTES,
    MAX_ARCHIVE_MEMBER_BYTES,
    MAX_ARCHIVE_NAME_BYTES,
    MAX_ARCHIVE_TAIL_BYTES,
)

FILE_MODE = 0o644
DIR_MODE = 0o755

BLOCK = 512
"""The tar block size: headers, data padding and the end marker are counted in blocks."""

Pathish = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Extraction budgets; the defaults are Kiln's CLI download caps."""

    max_entries: int = MAX_ARCHIVE_ENTRIES
    max_expanded_bytes: int = MAX_ARCHIVE_EXPANDED_BYTES
    max_member_bytes: int = MAX_ARCHIVE_MEMBER_BYTES
    max_name_bytes: int = MAX_ARCHIVE_NAME_BYTES
    max_compressed_bytes: int = MAX_ARCHIVE_COMPRESSED_BYTES
    max_tail_bytes: int = MAX_ARCHIVE_TAIL_BYTES

    @property
    def max_stream_bytes(self) -> int:
        """Most decompressed bytes an archive within the other budgets can contain."""
        per_entry = 2 * BLOCK  # header plus at most one block of padding
        end = 2 * BLOCK
        return self.max_expanded_bytes + self.max_entries * per_entry + end + self.max_tail_bytes


DEFAULT_LIMITS = ArchiveLimits()


class MemberRules(Protocol):
    """What one kind of archive may hold, consulted at every member header before a byte
    of that member reaches the disk.

    The generic budgets bound any archive; these bound a particular one by its own
    manifest. Extraction with rules reads the archive twice: a first pass writes nothing,
    keeps the members :meth:`wants` in memory (their sizes already passed :meth:`check`)
    and stops once :meth:`ready`; the second pass writes, calling :meth:`check` again with
    everything the manifests declare known, so nothing undeclared or mis-sized is ever
    written. Names are relative to the archive root (``""`` is the root itself).
    """

    def check(self, relative: str, is_dir: bool, size: int) -> None:
        """Raise unless a member of this name, kind and declared size can belong."""

    def wants(self, relative: str) -> bool:
        """Whether the first pass keeps this member's bytes for :meth:`capture`."""

    def capture(self, relative: str, data: bytes) -> None:
        """Take a wanted member's bytes (a manifest); may raise if they are invalid."""

    def ready(self) -> bool:
        """Everything wanted has been captured: the first pass may stop."""

    def missing(self) -> None:
        """Raise for what was wanted but never seen (the first pass reached the end)."""


def check_root_name(root_name: str) -> None:
    """Refuse a root that is not one valid path component (a usage error of the caller,
    checked before any file is opened)."""
    try:
        parts = validate_relative_path(root_name)
    except PathInvalid as exc:
        raise UsageError(f"root name {snippet(root_name)}: {exc.rule}") from None
    if len(parts) != 1:
        raise UsageError(f"root name {snippet(root_name)} must be a single path component")


__all__ = [
    "BLOCK",
    "DEFAULT_LIMITS",
    "DIR_MODE",
    "FILE_MODE",
    "ArchiveLimits",
    "MemberRules",
    "Pathish",
    "check_root_name",
]
