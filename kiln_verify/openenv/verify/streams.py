"""The summary and the replay read as streams (kiln-openenv-contract §6; docs/performance.md).

Both files are single JSON documents whose bulk is one top-level array (``rollouts`` in the
summary, ``groups`` in the replay); :func:`kiln_verify.core.jsonstream.iter_members`
yields one element at a time, so memory does not grow with the bundle.

* :func:`scan_summary` is pass 1 over the summary: the whole document is strict-parsed and
  validated (same errors and precedence as parsing it whole: JSON errors anywhere, then the
  version, then the record in field order, then the §2.6 version rules), the rollout
  records are counted and their statistics accumulated, and the bytes are hashed.
  :meth:`SummaryScan.records` is pass 2 (:mod:`kiln_verify.openenv.verify.summary_pass`):
  the records again, in order; the bytes must hash as in pass 1.
* :class:`ReplayStream` reads the replay once: the header (validated with the first group
  as a :class:`ReplayManifest`), then one validated :class:`ReplayGroup` at a time, hashing
  the exact bytes for the §6.3 digest.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kiln_verify.core.jsonstream import Member, iter_members
from kiln_verify.errors import (
    BundleReplayDigestMismatch,
    KilnError,
    RecordInvalid,
    RecordSchemaUnsupported,
    SummaryVersionUnsupported,
)
from kiln_verify.limits import (
    MAX_GROUPS,
    MAX_OPENENV_REPLAY_BYTES,
    MAX_OPENENV_SUMMARY_BYTES,
    MAX_ROLLOUTS,
)
from kiln_verify.openenv.records.replay import REPLAY_SCHEMA, ReplayGroup, ReplayManifest
from kiln_verify.openenv.records.summary import (
    SUMMARY_VERSIONS,
    RolloutRecord,
    RolloutStats,
    RolloutSummary,
    check_version_rules,
)
from kiln_verify.openenv.verify.files import open_hashed
from kiln_verify.openenv.verify.stats import StatsAccumulator
from kiln_verify.openenv.verify.summary_pass import SummaryRecords
from kiln_verify.records import validate_record

__all__ = ["ReplayStream", "SummaryScan", "scan_summary"]

_REPLAY_HEADER = (
    "schema",
    "client_profile",
    "dataset_sha256",
    "protocol_error_reward",
    "max_steps",
    "environments",
)
"""The replay members needed before its groups can be checked."""


def _too_long(document: str, key: str, bound: int, source: str) -> RecordInvalid:
    return RecordInvalid(
        f"{document} at $.{key}: List should have at most {bound} items after validation",
        path=source,
    )


class SummaryScan:
    """Pass 1 over the summary: the validated header, record count, recomputed stats."""

    def __init__(
        self, path: Path, summary: RolloutSummary, count: int, stats: RolloutStats | None, sha: str
    ) -> None:
        self.path = path
        self.summary = summary
        """The receipt, validated with only its first rollout record kept."""
        self.count = count
        self.stats = stats
        self._sha = sha

    @property
    def sha256(self) -> str:
        """The digest of the summary bytes pass 1 validated."""
        return self._sha

    def records(self) -> SummaryRecords:
        """Pass 2: the rollout records again, in order (see :class:`SummaryRecords`)."""
        return SummaryRecords(self.path, self._sha)


def scan_summary(path: Path) -> SummaryScan:
    """Pass 1 (see the module text); raises what :func:`read_summary` raises."""
    shown = os.fspath(path)
    header: dict[str, Any] = {}
    streamed = False
    count = 0
    first: Any = None
    failure: tuple[Any, int] | None = None
    stats = StatsAccumulator()
    with open_hashed(
        path, max_bytes=MAX_OPENENV_SUMMARY_BYTES, limit="MAX_OPENENV_SUMMARY_BYTES"
    ) as (reader, _):
        for member in iter_members(
            reader.read, "rollouts", max_bytes=MAX_OPENENV_SUMMARY_BYTES, source=shown
        ):
            if not member.element:
                header[member.key] = member.value
                continue
            streamed = True
            if failure is None and count < MAX_ROLLOUTS:
                try:
                    record = validate_record(RolloutRecord, member.value)
                except RecordInvalid:
                    failure = (member.value, count)
                else:
                    stats.add(record)
                    if first is None:
                        first = member.value
            count += 1
        sha = str(reader.sha256)
    if header.get("schema") not in SUMMARY_VERSIONS:
        raise SummaryVersionUnsupported(
            "rollout summary schema is not one of kiln.openenv-rollout-summary.v2..v5",
            path=shown,
        )
    if streamed:
        # Validate the header with one representative record: the first invalid one (its
        # error is reported at its real index) or the first record.
        header["rollouts"] = [failure[0] if failure is not None else first]
    try:
        summary = validate_record(RolloutSummary, header, source=shown)
    except RecordInvalid as exc:
        marker = "at $.rollouts[0]"
        if failure is not None and failure[1] and marker in exc.rule:
            exc.rule = exc.rule.replace(marker, f"at $.rollouts[{failure[1]}]", 1)
            exc.args = (exc.rule,)
        raise
    if count > MAX_ROLLOUTS:
        raise _too_long("RolloutSummary", "rollouts", MAX_ROLLOUTS, shown)
    check_version_rules(summary, shown)
    total = count if streamed else len(summary.rollouts)
    return SummaryScan(path, summary, total, stats.result() if stats.count else None, sha)


class ReplayStream:
    """One pass over the replay: header, then one validated group at a time, hashed."""

    def __init__(self, path: Path, *, expected_bytes: int, expected_sha256: str) -> None:
        self.path = path
        self.shown = os.fspath(path)
        self._stack = contextlib.ExitStack()
        self._reader, self.size = self._stack.enter_context(
            open_hashed(path, max_bytes=MAX_OPENENV_REPLAY_BYTES, limit="MAX_OPENENV_REPLAY_BYTES")
        )
        self._members: Iterator[Member] | None = None
        self._expected_bytes = expected_bytes
        self._expected_sha = expected_sha256
        self.groups_read = 0
        self.finished = False
        self._header: dict[str, Any] = {}
        self._first: Any = None
        self._late: dict[str, Any] | None = {}

    def close(self) -> None:
        self._stack.close()

    def check_size(self, size: int) -> None:
        if size != self._expected_bytes:
            raise BundleReplayDigestMismatch(
                f"replay file has {size} bytes, the summary says {self._expected_bytes} (§6.3)",
                path=self.shown,
            )

    def _iter(self) -> Iterator[Member]:
        return iter_members(
            self._reader.read, "groups", max_bytes=MAX_OPENENV_REPLAY_BYTES, source=self.shown
        )

    def header(self) -> tuple[ReplayManifest, ReplayGroup | None]:
        """The validated header and the first group (``None`` if there is none)."""
        members = self._iter()
        values: dict[str, Any] = {}
        first: Any = None
        streamed = False
        for member in members:
            if member.element:
                streamed = True
                first = member.value
                break
            values[member.key] = member.value
        if streamed and any(key not in values for key in _REPLAY_HEADER):
            # groups before (some of) the header: read the header in a separate pass
            values = self._late_header(values)
            self._late = None  # members after the groups are in `values` already
        elif not streamed:
            self.finished = True
        self._members = members
        if values.get("schema") != REPLAY_SCHEMA:
            raise RecordSchemaUnsupported(
                f"replay manifest schema is not {REPLAY_SCHEMA}", path=self.shown
            )
        if streamed:
            self._header, self._first = dict(values), first
            values["groups"] = [first]
        manifest = validate_record(ReplayManifest, values, source=self.shown)
        if streamed:
            self.groups_read = 1
            return manifest, manifest.groups[0]
        return manifest, None

    def _late_header(self, seen: dict[str, Any]) -> dict[str, Any]:
        """Header members that follow the groups, from a second read of the whole file.

        The second read is hashed too and must match the summary's digest, so the header
        comes from the very bytes the first pass's digest covers, even if the file was
        swapped between the two opens.
        """
        values = dict(seen)
        with open_hashed(
            self.path, max_bytes=MAX_OPENENV_REPLAY_BYTES, limit="MAX_OPENENV_REPLAY_BYTES"
        ) as (reader, _):
            for member in iter_members(
                reader.read, "groups", max_bytes=MAX_OPENENV_REPLAY_BYTES, source=self.shown
            ):
                if not member.element:
                    values[member.key] = member.value
            reader.drain()
            if reader.size != self._expected_bytes or str(reader.sha256) != self._expected_sha:
                raise BundleReplayDigestMismatch(
                    "the replay changed while it was read (its header follows its groups and "
                    "the second read differs from the summary's replay_sha256) (§6.3)",
                    path=self.shown,
                )
        return values

    def next_group(self) -> ReplayGroup | None:
        """The next validated group, or ``None`` after the last one."""
        assert self._members is not None
        if self.finished:
            return None
        for member in self._members:
            if not member.element:
                if self._late is not None:
                    self._late[member.key] = member.value
                continue
            index = self.groups_read
            if index >= MAX_GROUPS:
                raise _too_long("ReplayManifest", "groups", MAX_GROUPS, self.shown)
            group = validate_record(
                ReplayGroup,
                member.value,
                source=self.shown,
                within=("ReplayManifest", ("groups", index)),
            )
            self.groups_read += 1
            return group
        self.finished = True
        return None

    def finish(self) -> None:
        """Read to the end (the document must stay valid) and check size and digest."""
        while self.next_group() is not None:
            pass
        if self._late:  # members after the groups: the manifest must still be valid
            values = {**self._header, **self._late, "groups": [self._first]}
            validate_record(ReplayManifest, values, source=self.shown)
        self._check_digest()

    def drain_digest_failure(self) -> KilnError | None:
        """After a failure: hash the rest; the digest mismatch to prefer to it, if any."""
        try:
            self._reader.drain()
        except KilnError:
            return None
        try:
            self._check_digest()
        except BundleReplayDigestMismatch as exc:
            return exc
        return None

    def _check_digest(self) -> None:
        self.check_size(self._reader.size)
        if str(self._reader.sha256) != self._expected_sha:
            raise BundleReplayDigestMismatch(
                "replay file SHA-256 differs from the summary's replay_sha256 (§6.3)",
                path=self.shown,
            )
