"""Exact, type-strict comparison of recorded and live JSON values (contract §7.1, §8.3).

Python's ``==`` says ``1 == 1.0 == True``; Kiln compares ``serde_json`` values, where an
integer, a float and a boolean are different values. :func:`first_difference` therefore
compares JSON *types* as well as values, at every depth, and returns the first differing
path (keys in sorted order, so the answer is deterministic) with both values rendered
as bounded compact JSON. Rewards are compared through their recorded JSON form, which
keeps the tag (``1`` vs ``1.0``).

Two strings that differ deep inside (a long text observation, a board drawn as text)
would render as two identical 80-character prefixes; they are shown instead as a window
around the first differing character (``MAX_DRIFT_CONTEXT_CHARS`` before it, the rest of
the ``MAX_ERROR_SNIPPET_CHARS`` budget after it) and the :class:`Difference` carries that
character's ``offset``, so a reader sees the difference itself.

The value comparison itself lives in :mod:`kiln_verify.openenv.jsondiff` (below replay, so
the volatile-identity rule shares it without importing replay); this module re-exports it
and adds the comparisons of replay's records.
"""

from __future__ import annotations

from kiln_verify.openenv.jsondiff import (
    ABSENT,
    Difference,
    bounded_path,
    first_difference,
    render,
    type_name,
)
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import ObservationResult, ProtocolErrorResult

__all__ = [
    "ABSENT",
    "Difference",
    "bounded_path",
    "first_difference",
    "observation_difference",
    "render",
    "result_difference",
    "type_name",
]


def observation_difference(
    expected: ObservationRecord, actual: ObservationRecord, path: str = "observation"
) -> Difference | None:
    """Compare two observation records field by field (reward tag included)."""
    return first_difference(expected.to_json(), actual.to_json(), path)


def result_difference(
    expected: ObservationResult | ProtocolErrorResult,
    actual: ObservationRecord | ProtocolErrorRecord,
) -> Difference | None:
    """Compare a recorded step result with what the live step returned.

    Observation vs observation and error vs error compare every field; any other pairing
    is a difference at ``kind``.
    """
    if isinstance(expected, ObservationResult):
        if isinstance(actual, ObservationRecord):
            return observation_difference(expected.observation, actual)
        return Difference("kind", render("observation"), render("protocol_error"))
    if isinstance(actual, ProtocolErrorRecord):
        return first_difference(expected.error.to_json(), actual.to_json(), "error")
    return Difference("kind", render("protocol_error"), render("observation"))
