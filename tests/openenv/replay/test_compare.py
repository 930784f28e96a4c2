"""Type-strict JSON comparison: first differing path, bounded renderings."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from kiln_verify.limits import MAX_ERROR_SNIPPET_CHARS
from kiln_verify.openenv.protocol.wire import Reward
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import ObservationResult, ProtocolErrorResult
from kiln_verify.openenv.replay import first_difference, result_difference


@pytest.mark.parametrize(
    ("expected", "actual", "path"),
    [
        (1, 1.0, "$"),
        (True, 1, "$"),
        (0, False, "$"),
        (None, 0, "$"),
        ({"a": 1}, {"a": 1.0}, "a"),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, "a[2]"),
        ({"a": {"b": "x"}}, {"a": {"b": "y"}}, "a.b"),
        ({"a": 1}, {"a": 1, "b": 2}, "b"),
        ({"a b": 1}, {"a b": 2}, '["a b"]'),
        ({"z": 1, "a": 1}, {"z": 2, "a": 2}, "a"),
    ],
)
def test_first_difference_is_type_strict(expected: Any, actual: Any, path: str) -> None:
    found = first_difference(expected, actual)
    assert found is not None
    assert found.path == path


def test_equal_values_have_no_difference() -> None:
    value = {"a": [1, 2.5, True, None, {"b": "c"}], "d": -0.0}
    assert first_difference(value, {"d": -0.0, "a": [1, 2.5, True, None, {"b": "c"}]}) is None


def test_values_are_bounded_and_absence_is_named() -> None:
    found = first_difference({"a": "x" * 10_000}, {})
    assert found is not None
    assert found.actual == "<absent>"
    assert len(found.expected) < MAX_ERROR_SNIPPET_CHARS + 40


def _observation(reward: Reward, **extra: Any) -> ObservationRecord:
    return ObservationRecord(observation={"n": 1}, reward=reward, done=False, **extra)


def test_result_pairings() -> None:
    recorded = ObservationResult(observation=_observation(Reward.from_json(1.0)))
    found = result_difference(recorded, _observation(Reward.from_json(1)))
    assert found is not None
    assert (found.path, found.expected, found.actual) == ("observation.reward", "'1.0'", "'1'")
    assert result_difference(recorded, _observation(Reward.from_json(1.0))) is None
    found = result_difference(recorded, _observation(Reward.from_json(1.0), metadata={"m": 1}))
    assert found is not None
    assert found.path == "observation.metadata"
    error = ProtocolErrorRecord(code="EXECUTION_ERROR", message="bad arm", errors=["x"])
    found = result_difference(recorded, error)
    assert found is not None
    assert found.path == "kind"
    recorded_error = ProtocolErrorResult(error=error, continued=True)
    assert result_difference(recorded_error, error) is None
    other = ProtocolErrorRecord(code="EXECUTION_ERROR", message="bad arm", errors=["y"])
    found = result_difference(recorded_error, other)
    assert found is not None
    assert found.path == "error.errors[0]"
    found = result_difference(recorded_error, _observation(Reward.from_json(None)))
    assert found is not None
    assert found.path == "kind"


def test_strings_differing_deep_inside_show_a_window_around_the_difference() -> None:
    recorded = "x" * 500 + "the cat sat on the mat and looked around the room" + "y" * 500
    live = recorded.replace("mat", "hat")
    found = first_difference({"text": recorded}, {"text": live}, "observation")
    assert found is not None
    assert found.path == "observation.text"
    assert found.offset == 519
    assert (found.expected_type, found.actual_type) == ("string", "string")
    # 24 characters of context before the first differing character, the rest after it
    tail = " and looked around the room" + "y" * 22
    assert found.expected == repr('…"xxxxxthe cat sat on the mat' + tail + '"…')
    assert found.actual == repr('…"xxxxxthe cat sat on the hat' + tail + '"…')
    assert len(found.expected) == MAX_ERROR_SNIPPET_CHARS + 2  # the repr quotes


def test_windows_mark_only_the_cut_sides_and_escape_as_json() -> None:
    found = first_difference("short", "sho")
    assert found is not None
    assert (found.offset, found.expected, found.actual) == (3, repr('"short"'), repr('"sho"'))
    found = first_difference('a\n"b\\c', 'a\n"b\\d')
    assert found is not None
    assert found.offset == 5
    assert found.expected == repr('"a\\n\\"b\\\\c"')
    long_tail = "q" * 300
    found = first_difference("ab" + long_tail, "ac" + long_tail)
    assert found is not None
    assert found.expected.startswith(repr('"ab')[:-1])  # nothing cut before: no ellipsis
    assert found.expected.endswith("\"…'")


def test_window_is_bounded_whatever_the_escapes() -> None:
    recorded = "\x01" * 400 + "A" + "\x02" * 400
    live = "\x01" * 400 + "B" + "\x02" * 400
    found = first_difference(recorded, live)
    assert found is not None
    assert found.offset == 400
    shown = ast.literal_eval(found.expected)  # the repr of the window text
    assert len(shown) <= MAX_ERROR_SNIPPET_CHARS
    assert "A" in shown
    assert "B" in ast.literal_eval(found.actual)


def test_types_are_named_for_the_drift_report() -> None:
    found = first_difference({"r": 1.0}, {"r": 1})
    assert found is not None
    assert (found.expected_type, found.actual_type, found.offset) == ("float", "integer", None)
    found = first_difference({"a": 1}, {})
    assert found is not None
    assert (found.expected_type, found.actual_type) == ("integer", "absent")
