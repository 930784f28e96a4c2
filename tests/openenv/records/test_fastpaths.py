"""The records' faster helpers agree with their plain definitions.

``bits_equal`` compares floats without packing them; ``sort_keys`` copies scalars inline;
omit-when-``None`` fields are dropped by pydantic's ``exclude_if`` instead of a Python wrap
serializer on every record (docs/performance.md). Each is checked against a reference.
"""

from __future__ import annotations

import math
import struct
from typing import Any, get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.core.jsonio import dumps_compact, loads
from kiln_verify.errors import KilnError
from kiln_verify.openenv.protocol.wire import Reward
from kiln_verify.openenv.records import (
    environment,
    evaluation,
    observation,
    replay,
    reports,
    rollout,
    serialize,
    summary,
)
from kiln_verify.openenv.records.observation import (
    ObservationRecord,
    ProtocolErrorCode,
    ProtocolErrorRecord,
)
from kiln_verify.openenv.records.prompt import (
    observation_content,
    observation_json_text,
    protocol_error_content,
)
from kiln_verify.openenv.records.replay import ReplayCandidate
from kiln_verify.records import Record, bits_equal, chat, policy, sort_keys

_MODULES = (chat, policy, environment, observation, evaluation, replay, reports, rollout, summary)

_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, math.nan, -math.nan, struct.unpack("<d", b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]]
)


@settings(max_examples=500, deadline=None)
@given(_floats, _floats)
def test_bits_equal_is_bitwise(left: float, right: float) -> None:
    assert bits_equal(left, right) == (struct.pack("<d", left) == struct.pack("<d", right))
    assert bits_equal(left, left) == (struct.pack("<d", left) == struct.pack("<d", left))


def test_bits_equal_accepts_ints_as_before() -> None:
    assert bits_equal(1, 1.0)
    assert not bits_equal(1, -1.0)


def reference_sort_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reference_sort_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [reference_sort_keys(item) for item in value]
    return value


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_sort_keys_matches_the_reference(value: Any) -> None:
    result = sort_keys(value)
    assert result == reference_sort_keys(value)
    assert repr(result) == repr(reference_sort_keys(value))  # key order too


def _records() -> list[type[Record]]:
    found: list[type[Record]] = []
    for module in _MODULES:
        for item in vars(module).values():
            if isinstance(item, type) and issubclass(item, Record) and item is not Record:
                found.append(item)
    return found


def test_every_omit_when_none_field_is_excluded_when_none() -> None:
    records = [model for model in _records() if model._omit_when_none]
    assert len(records) >= 10
    for model in records:
        names = {field.alias or name: field for name, field in model.model_fields.items()}
        for key in model._omit_when_none:
            exclude_if = names[key].exclude_if
            assert exclude_if is not None, (model, key)
            assert exclude_if(None), (model, key)
            assert not exclude_if(0), (model, key)


def test_omitted_and_present_optional_fields() -> None:
    bare = ProtocolErrorRecord(code="VALIDATION_ERROR", message="m")
    assert bare.to_json() == {"code": "VALIDATION_ERROR", "message": "m"}
    full = ProtocolErrorRecord(
        code="CAPACITY_REACHED", message="m", errors=[], active_sessions=0, max_sessions=1
    )
    assert list(full.to_json()) == ["code", "message", "errors", "active_sessions", "max_sessions"]
    observation = ObservationRecord(
        observation={"b": 1, "a": [{"d": 2, "c": 3}]}, reward=Reward.from_json(None), done=False
    )
    assert observation.to_json() == {
        "observation": {"a": [{"c": 3, "d": 2}], "b": 1},
        "reward": None,
        "done": False,
    }
    assert list(observation.to_json()["observation"]) == ["a", "b"]


def test_final_state_is_omitted_only_when_unset() -> None:
    base: dict[str, Any] = {
        "candidate_index": 0,
        "exchanges": [],
        "episode_return": 0.0,
        "terminal_done": False,
        "termination": "protocol_error",
        "recoverable_protocol_errors": 0,
        "capacity_retries": 0,
        "model_tokens": 0,
        "model_latency_ms": 0.0,
    }
    assert "final_state" not in ReplayCandidate(**base).to_json()
    assert ReplayCandidate(**base, final_state=None).to_json()["final_state"] is None


_rewards = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e16, 1e-7, -0.0, 1.0])
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=5), _json, max_size=5),
    _rewards,
    st.booleans(),
    st.none() | st.dictionaries(st.text(max_size=5), _json, max_size=3),
    st.sampled_from(["reset result", "step result"]),
)
def test_parsed_observation_rendering_matches_to_json(
    payload: dict[str, Any], reward: Any, done: bool, metadata: Any, label: Any
) -> None:
    document: dict[str, Any] = {"observation": payload, "reward": reward, "done": done}
    if metadata is not None:
        document["metadata"] = metadata
    try:  # through the strict parser, as the verifier reads it
        parsed = loads(dumps_compact(document), max_bytes=1 << 22)
    except KilnError:  # a lone surrogate from st.text()
        return
    record = ObservationRecord.from_json(parsed)
    assert list(ObservationRecord.model_fields) == ["observation", "reward", "done", "metadata"]
    expected = dumps_compact(record.to_json()).decode("utf-8")
    assert observation_json_text(record) == expected
    assert observation_content(label, record, parsed=True) == observation_content(label, record)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _json, max_size=6))
def test_parsed_reset_digest_matches_the_reference(payload: dict[str, Any]) -> None:
    """The verifier's ``reset_sha256(..., parsed=True)`` (``orjson`` through
    ``parsed_text``) hashes the bytes of our own canonical writer."""
    try:
        parsed = loads(dumps_compact(payload), max_bytes=1 << 22)
    except KilnError:  # a lone surrogate from st.text(): never a parsed value
        return
    assert serialize.reset_sha256(parsed, parsed=True) == serialize.reset_sha256(parsed)


_CODES = list(get_args(ProtocolErrorCode))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_CODES),
    st.text(max_size=8),
    st.none() | st.lists(_json, max_size=3),
    st.none() | st.integers(min_value=0, max_value=2**64 - 1),
    st.none() | st.integers(min_value=0, max_value=2**64 - 1),
    st.none() | st.text(max_size=5),
    st.booleans(),
)
def test_parsed_protocol_error_rendering_matches_to_json(
    code: str,
    message: str,
    errors: Any,
    active: Any,
    most: Any,
    factory: Any,
    continued: bool,
) -> None:
    document: dict[str, Any] = {"code": code, "message": message}
    for key, value in [
        ("errors", errors),
        ("active_sessions", active),
        ("max_sessions", most),
        ("factory_name", factory),
    ]:
        if value is not None:
            document[key] = value
    try:  # through the strict parser, as the verifier reads it
        parsed = loads(dumps_compact(document), max_bytes=1 << 22)
    except KilnError:  # a lone surrogate or a non-finite float: never a parsed value
        return
    record = ProtocolErrorRecord.from_json(parsed)
    assert list(ProtocolErrorRecord.model_fields) == [
        "code",
        "message",
        "errors",
        "active_sessions",
        "max_sessions",
        "factory_name",
    ]
    assert protocol_error_content(record, continued, parsed=True) == protocol_error_content(
        record, continued
    )
