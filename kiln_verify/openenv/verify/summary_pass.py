"""Pass 2 over the summary: its rollout records again, in order, for the lock-step checks.

Pass 1 (:func:`kiln_verify.openenv.verify.streams.scan_summary`) strict-parsed and
validated every byte of the summary and kept its SHA-256. Pass 2 reads the same file
again and hashes it again. While the bytes are the same, each record here is exactly the
JSON object pass 1 validated as a ``RolloutRecord``: the strict validation refuses every
coercion, so its field values are the object's own values, of the same types. So pass 2
reads the parsed objects through a typed view (:class:`SummaryRecord`: the
``RolloutRecord`` fields as attributes, no validation, no copy of any value) instead of
validating 16,384 records a second time (about 5 % of the verification of a small-record
bundle).

Whether the bytes are the same is known only once the whole file has been hashed: at the
end (:meth:`SummaryRecords.__next__` then compares the digest) or, when a check fails
before the end, through :meth:`SummaryRecords.changed`, which the engine consults so that
a summary that changed under it is reported as such (``path_unreadable``: the summary
changed while it was being read), not as whatever the changed bytes happen to break. The
checks that consume these objects are written so that no value, however it changed,
makes them raise anything but a :class:`~kiln_verify.errors.KilnError`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from kiln_verify.core.jsonstream import Member, iter_members
from kiln_verify.errors import FileAccessError, KilnError
from kiln_verify.limits import MAX_OPENENV_SUMMARY_BYTES
from kiln_verify.openenv.verify.files import HashingReader, open_hashed

__all__ = ["SUMMARY_RECORD_FIELDS", "SummaryRecord", "SummaryRecords"]


class SummaryRecord:
    """One summary rollout record as pass 2 read it: the object pass 1 validated as a
    ``RolloutRecord``, its fields as typed attributes (an absent optional field reads as
    ``None``, the model's default). Should the file have changed between the passes, a
    field may hold anything (or ``None`` when its key is gone): comparisons then fail,
    never raise, and the engine reports the change (:meth:`SummaryRecords.changed`)."""

    __slots__ = (
        "candidate_index",
        "capacity_retries",
        "environment_name",
        "environment_url",
        "episode_return",
        "group_index",
        "model_latency_ms",
        "model_tokens",
        "protocol_error_code",
        "recoverable_protocol_errors",
        "seed",
        "steps",
        "terminal_done",
        "termination",
    )

    group_index: int
    candidate_index: int
    environment_name: str
    environment_url: str
    seed: int
    steps: int
    episode_return: float
    terminal_done: bool
    termination: str
    recoverable_protocol_errors: int
    capacity_retries: int
    model_tokens: int
    model_latency_ms: float
    protocol_error_code: str | None

    def __init__(self, values: dict[str, Any]) -> None:
        get = values.get
        for name in SUMMARY_RECORD_FIELDS:
            setattr(self, name, get(name))


SUMMARY_RECORD_FIELDS: Final = tuple(SummaryRecord.__annotations__)
"""The view's fields, in ``RolloutRecord`` order (a test pins them to the model's)."""


class SummaryRecords:
    """Iterator over the summary's rollout records (typed views of the parsed objects)."""

    def __init__(self, path: Path, sha256: str) -> None:
        self._shown = os.fspath(path)
        self._sha = sha256
        self._stack = contextlib.ExitStack()
        self._reader: HashingReader
        opened = open_hashed(
            path, max_bytes=MAX_OPENENV_SUMMARY_BYTES, limit="MAX_OPENENV_SUMMARY_BYTES"
        )
        self._reader, _ = self._stack.enter_context(opened)
        self._members: Iterator[Member] = iter_members(
            self._reader.read, "rollouts", max_bytes=MAX_OPENENV_SUMMARY_BYTES, source=self._shown
        )
        self._closed = False

    def __iter__(self) -> SummaryRecords:
        return self

    def __next__(self) -> SummaryRecord:
        """The next record; at the end, the digest check. A parse error propagates (the
        caller asks :meth:`changed` which error to report)."""
        if self._closed:
            raise StopIteration
        for member in self._members:
            if member.element:
                if type(member.value) is not dict:  # pass 1 validated an object here
                    raise self._changed_error()
                return SummaryRecord(member.value)
        same = str(self._reader.sha256) == self._sha
        self.close()
        if not same:
            raise self._changed_error()
        raise StopIteration

    def _changed_error(self) -> FileAccessError:
        return FileAccessError("the summary changed while it was being read", path=self._shown)

    def changed(self) -> FileAccessError | None:
        """After a failure: hash the rest of the summary; the error to prefer if its bytes
        are not the ones pass 1 validated (``None`` if they are, if they cannot be read,
        or if pass 2 already ended and compared its digest)."""
        if self._closed:
            return None
        try:
            self._reader.drain()
        except KilnError:
            return None
        finally:
            self.close()
        return self._changed_error() if str(self._reader.sha256) != self._sha else None

    def close(self) -> None:
        self._closed = True
        self._stack.close()
