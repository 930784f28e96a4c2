"""Per-step records built without validation are the records validation builds.

``kiln_verify.openenv.collect.fastrecords`` assembles the observation record, its replay
exchange and the two turn segments directly when validation could only pass its inputs
through. Each builder is compared with the validated constructor it replaces (the same
``__dict__`` in the same order holding the same objects, the same fields-set, equality,
the same JSON), on ordinary and unusual inputs; inputs of other types must take the
validated constructor (and fail there exactly as before). The parsed-action memory of
``EnvironmentContext`` is compared with ``parse_model_action``.
"""

from __future__ import annotations

import math
from typing import Any

import pydantic
import pytest
from pydantic import ValidationError

from kiln_verify.limits import MAX_ACTION_CHECK_CACHE_ENTRIES, MAX_ACTION_CHECK_CACHE_KEY_CHARS
from kiln_verify.openenv.collect import fastrecords
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.prompt import parse_model_action
from kiln_verify.openenv.records.replay import ObservationResult, ReplayExchange
from kiln_verify.openenv.wire import Observation, Reward
from kiln_verify.records import TurnSegment
from oracle.runner import ServerHandle
from tests.collect.contexts import environment_context


def _same(fast: Any, validated: Any) -> None:
    assert type(fast) is type(validated)
    assert list(fast.__dict__) == list(validated.__dict__)
    for key, value in fast.__dict__.items():
        if key == "result":
            _same(value, validated.__dict__[key])
        else:
            assert value is validated.__dict__[key], key
    assert fast.model_fields_set == validated.model_fields_set
    assert fast.__pydantic_extra__ == validated.__pydantic_extra__
    assert fast.__pydantic_private__ == validated.__pydantic_private__
    assert fast == validated
    assert fast.to_json() == validated.to_json()
    assert fast.model_dump_json() == validated.model_dump_json()


_REVIEWED = pydantic.VERSION == fastrecords.REVIEWED_PYDANTIC
_UNREVIEWED = (
    f"pydantic {pydantic.VERSION} is not the reviewed {fastrecords.REVIEWED_PYDANTIC}: the "
    "fast construction is off (review fastrecords against it, then record the fingerprints)"
)


def test_another_pydantic_release_turns_the_fast_construction_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pydantic, "VERSION", "2.999.0")
    fastrecords.active.cache_clear()
    try:
        assert not fastrecords.active()
        _same(fastrecords.action_segment("x"), TurnSegment.action("x"))
    finally:
        monkeypatch.undo()
        fastrecords.active.cache_clear()


@pytest.mark.skipif(not _REVIEWED, reason=_UNREVIEWED)
def test_the_reviewed_classes_are_in_use() -> None:
    # Fails when a record class changed: re-check the module's reasoning against the new
    # class, then record its fingerprint in FINGERPRINTS.
    for cls in (ObservationRecord, ObservationResult, ReplayExchange, TurnSegment):
        assert fastrecords.fingerprint(cls) == fastrecords.FINGERPRINTS[cls.__name__], cls
    assert fastrecords.active()


WIRE: list[Observation] = [
    Observation({"input_text": "x", "n": [1, 2.5]}, Reward.from_json(1), False, None),
    Observation({}, Reward.from_json(None), True, {"m": {"k": [None]}}),
    Observation({"a": 1}, Reward.from_json(-0.0), False, {}),
    Observation({"a": 1}, Reward.from_json(True), False, None),
    Observation({"a": math.nan}, Reward.from_json(2**63 - 1), True, None),
]


@pytest.mark.parametrize("observation", WIRE)
def test_observation_record(observation: Observation) -> None:
    _same(fastrecords.observation_record(observation), ObservationRecord.from_wire(observation))


@pytest.mark.parametrize("content", ["", "x", '{"arm": 1}', "é\n\u2028", "a" * 10000])
def test_segments(content: str) -> None:
    _same(fastrecords.action_segment(content), TurnSegment.action(content))
    _same(fastrecords.observation_turn(content), TurnSegment.observation(content))


@pytest.mark.parametrize("step_index", [0, 1, 2**64 - 1])
@pytest.mark.parametrize("action", [{}, {"arm": 1}, {"b": [1, {"a": None}]}])
def test_observation_exchange(step_index: int, action: dict[str, Any]) -> None:
    record = ObservationRecord.from_wire(WIRE[0])
    _same(
        fastrecords.observation_exchange(step_index, action, record),
        ReplayExchange(
            step_index=step_index, action=action, result=ObservationResult(observation=record)
        ),
    )


class Text(str):
    pass


class Mapping(dict[str, Any]):
    pass


def _validated_outcome(build: Any) -> Any:
    try:
        return ("ok", build())
    except ValidationError as exc:
        return ("error", exc.errors(include_url=False))


def test_other_input_types_take_the_validated_constructors() -> None:
    record = ObservationRecord.from_wire(WIRE[0])
    cases: list[tuple[Any, Any]] = [
        (
            lambda: fastrecords.action_segment(Text("x")),
            lambda: TurnSegment.action(Text("x")),
        ),
        (
            lambda: fastrecords.observation_turn(1),  # type: ignore[arg-type]
            lambda: TurnSegment.observation(1),  # type: ignore[arg-type]
        ),
        (
            lambda: fastrecords.observation_exchange(True, {}, record),
            lambda: ReplayExchange(
                step_index=True, action={}, result=ObservationResult(observation=record)
            ),
        ),
        (
            lambda: fastrecords.observation_exchange(-1, {}, record),
            lambda: ReplayExchange(
                step_index=-1, action={}, result=ObservationResult(observation=record)
            ),
        ),
        (
            lambda: fastrecords.observation_exchange(2**64, {}, record),
            lambda: ReplayExchange(
                step_index=2**64, action={}, result=ObservationResult(observation=record)
            ),
        ),
        (
            lambda: fastrecords.observation_exchange(0, Mapping(a=1), record),
            lambda: ReplayExchange(
                step_index=0, action=Mapping(a=1), result=ObservationResult(observation=record)
            ),
        ),
        (
            lambda: fastrecords.observation_record(
                Observation({}, Reward.from_json(1), 1, None)  # type: ignore[arg-type]
            ),
            lambda: ObservationRecord.from_wire(
                Observation({}, Reward.from_json(1), 1, None)  # type: ignore[arg-type]
            ),
        ),
    ]
    for fast, validated in cases:
        got, expected = _validated_outcome(fast), _validated_outcome(validated)
        assert got[0] == expected[0]
        if got[0] == "ok":
            assert got[1] == expected[1]
            assert got[1].model_fields_set == expected[1].model_fields_set
        else:
            assert got[1] == expected[1]


@pytest.mark.skipif(not _REVIEWED, reason=_UNREVIEWED)
def test_a_changed_class_turns_the_fast_construction_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(fastrecords.FINGERPRINTS, "TurnSegment", "0" * 64)
    fastrecords.active.cache_clear()
    try:
        assert not fastrecords.active()
        segment = fastrecords.action_segment("x")
        _same(segment, TurnSegment.action("x"))
    finally:
        monkeypatch.undo()
        fastrecords.active.cache_clear()
    assert fastrecords.active()


# --- the parsed-action memory -------------------------------------------------------------


OUTPUTS = [
    '{"arm": 1}',
    ' ```json\n{"arm": 2.5, "b": true, "c": null, "d": "x"}\n``` ',
    '{"arm": [1]}',
    '{"arm": {"x": 1}}',
    "[1]",
    "not json",
    "```",
    '{"a": 1, "a": 2}',
    '{"a": NaN}',
    "",
]


def test_parse_action_is_parse_model_action(servers: dict[str, ServerHandle]) -> None:
    env = environment_context(servers["bandit"].base_url)
    for _ in range(3):
        for output in OUTPUTS:
            got, expected = env.parse_action(output), parse_model_action(output)
            assert got == expected
            assert type(got) is type(expected)
            if isinstance(got, dict):
                assert isinstance(expected, dict)
                assert list(got) == list(expected)
                assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]
    # flat objects and refusals are remembered, nested objects are not
    assert '{"arm": 1}' in env._actions
    assert "not json" in env._actions
    assert '{"arm": [1]}' not in env._actions
    first, second = env.parse_action('{"arm": 1}'), env.parse_action('{"arm": 1}')
    assert isinstance(first, dict)
    assert first == second
    assert first is not second  # a fresh object every time
    first["arm"] = 99
    assert env.parse_action('{"arm": 1}') == {"arm": 1}


def test_parse_action_memory_is_bounded(servers: dict[str, ServerHandle]) -> None:
    env = environment_context(servers["bandit"].base_url)
    long_output = '{"arm": "' + "x" * MAX_ACTION_CHECK_CACHE_KEY_CHARS + '"}'
    assert env.parse_action(long_output) == parse_model_action(long_output)
    assert long_output not in env._actions
    for arm in range(MAX_ACTION_CHECK_CACHE_ENTRIES + 5):
        output = f'{{"arm": {arm}}}'
        assert env.parse_action(output) == {"arm": arm}
    assert len(env._actions) == MAX_ACTION_CHECK_CACHE_ENTRIES


def test_same_start_compares_tool_calls_through_the_digests() -> None:
    from kiln_verify.openenv.collect.engine import same_start
    from kiln_verify.records import ChatMessage

    reset = ObservationRecord.from_wire(WIRE[0])

    def prompt(tool_calls: Any) -> list[ChatMessage]:
        return [
            ChatMessage(role="system", content="s"),
            ChatMessage(role="user", content="u", tool_calls=tool_calls),
        ]

    assert same_start(prompt(None), reset, prompt(None), reset)
    assert same_start(prompt([{"b": 1, "a": 2}]), reset, prompt([{"a": 2, "b": 1}]), reset)
    assert not same_start(prompt([{"a": 1}]), reset, prompt([{"a": 1.0}]), reset)
    assert not same_start(prompt([{"a": 1}]), reset, prompt(None), reset)
    other = ObservationRecord.from_wire(WIRE[2])
    assert not same_start(prompt(None), reset, prompt(None), other)
