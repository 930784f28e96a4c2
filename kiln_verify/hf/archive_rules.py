"""What a bundle or envelope archive may hold, enforced before a member reaches the disk.

``hf verify ARCHIVE`` and ``hf verify-import ARCHIVE`` used to extract every member within
the generic archive budgets (64 GiB for a bundle) and only then compare the file set with
the manifests, so a 2 MB archive could write gigabytes before failing. These rules
(:class:`kiln_verify.core.safe_tar.MemberRules`) let extraction refuse a member at its
header instead. Every name an archive of this kind can hold is known in advance (every
file identity has a fixed path), and each belongs to one *side*, governed by one manifest:
the export manifest declares the export's files, the result manifest the trained ones.

- Before a side's manifest has been read (the dry first pass writes nothing), a member of
  that side is admitted by name, within its per-file cap; any other name is refused.
- Once it has been read, a member of that side must be one the manifest declares, with
  exactly the declared size (the manifest itself: exactly the bytes read in the first
  pass); the second pass, which writes, only ever runs with every side read.

So the bytes written never exceed what the manifests declare, a member that cannot belong
stops extraction at its header, and the errors are the codes a directory verification
gives (``hf_bundle_extra_file``, ``hf_bundle_missing_file``, ``size_mismatch``,
``limit_exceeded``, the manifest readers' codes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kiln_verify.errors import (
    HfBundleExtraFile,
    HfBundleMissingFile,
    KilnError,
    LimitExceeded,
    SizeMismatch,
    snippet,
)

__all__ = ["DeclaredMembers", "Side"]

Declare = Callable[[bytes], Mapping[str, int]]
"""A manifest's bytes -> ``{relative path: size}`` of every other file it declares."""


@dataclass(frozen=True)
class Side:
    """The files one manifest governs: ``names`` is every file the side may ever hold
    (the manifest included), ``declare`` parses the manifest (raising its reader's error
    when it is invalid) and says which of them are present and how large."""

    manifest: str
    names: frozenset[str]
    declare: Declare


class DeclaredMembers:
    """:class:`~kiln_verify.core.safe_tar.MemberRules` over one or more :class:`Side`."""

    def __init__(
        self,
        sides: tuple[Side, ...],
        *,
        caps: Mapping[str, tuple[str, int]],
        what: str,
        extra_hint: Callable[[str], str | None] = lambda _name: None,
        missing_hint: Callable[[str], str | None] = lambda _name: None,
    ) -> None:
        self._sides = {side.manifest: side for side in sides}
        self._side_of = {name: side for side in sides for name in side.names}
        self._caps = caps
        self._what = what
        self._extra_hint = extra_hint
        self._missing_hint = missing_hint
        self._declared: dict[str, dict[str, int]] = {}  # manifest -> {name: exact size}

    def _extra(self, name: str) -> KilnError:
        return HfBundleExtraFile(
            f"archive member {snippet(name)} is not a file {self._what} can hold; "
            "extraction stopped before writing it",
            hint=self._extra_hint(name),
        )

    def check(self, relative: str, is_dir: bool, size: int) -> None:
        if not relative:
            return
        if is_dir:
            prefix = relative + "/"
            if not any(name.startswith(prefix) for name in self._possible()):
                raise self._extra(prefix)
            return
        side = self._side_of.get(relative)
        if side is None:
            raise self._extra(relative)
        limit = self._caps.get(relative)
        if limit is not None and size > limit[1]:
            raise LimitExceeded(
                f"archive member {relative}", limit=limit[0], bound=limit[1], observed=size
            )
        declared = self._declared.get(side.manifest)
        if declared is None:
            return
        if relative not in declared:
            raise self._extra(relative)
        if size != declared[relative]:
            raise SizeMismatch(
                f"archive member {relative} holds {size} bytes; its manifest declares "
                f"{declared[relative]}; extraction stopped before writing it"
            )

    def _possible(self) -> set[str]:
        """Names that can still appear: declared ones of read sides, any of the others."""
        out: set[str] = set()
        for manifest, side in self._sides.items():
            declared = self._declared.get(manifest)
            out |= set(declared) if declared is not None else set(side.names)
        return out

    def wants(self, relative: str) -> bool:
        return relative in self._sides and relative not in self._declared

    def capture(self, relative: str, data: bytes) -> None:
        side = self._sides[relative]
        declared = dict(side.declare(data))
        unknown = sorted(set(declared) - side.names)
        if unknown:  # a manifest model that grew a path this table does not know
            raise self._extra(unknown[0])
        declared[relative] = len(data)
        self._declared[relative] = declared

    def ready(self) -> bool:
        return len(self._declared) == len(self._sides)

    def missing(self) -> None:
        for manifest in self._sides:
            if manifest not in self._declared:
                raise HfBundleMissingFile(
                    f"{self._what} must hold {manifest}; the archive has none",
                    hint=self._missing_hint(manifest),
                )
