"""The Sans-I/O codec: request encoding, reply decoding, the tagged reward, error codes."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.errors import (
    KilnError,
    LimitExceeded,
    ProtocolViolation,
    UnexpectedResponse,
)
from kiln_verify.limits import MAX_PROTOCOL_MESSAGE_CHARS, MAX_SERVER_FRAME_BYTES
from kiln_verify.openenv.protocol.wire import (
    ErrorCode,
    Observation,
    ProtocolError,
    RequestKind,
    Reward,
    StateResult,
    check_response,
    decode_server_frame,
    encode_close,
    encode_reset,
    encode_state,
    encode_step,
)


def test_encoders_write_compact_frames() -> None:
    assert encode_reset() == '{"type":"reset"}'
    assert (
        encode_reset({"seed": 17, "episode_id": "kiln-interop"})
        == '{"type":"reset","data":{"seed":17,"episode_id":"kiln-interop"}}'
    )
    assert (
        encode_step({"amount": 2, "note": "é"}) == '{"type":"step","data":{"amount":2,"note":"é"}}'
    )
    assert encode_state() == '{"type":"state"}'
    assert encode_close() == '{"type":"close"}'


def test_step_action_must_be_an_object() -> None:
    with pytest.raises(ProtocolViolation):
        encode_step([1, 2])  # type: ignore[arg-type]


def test_client_frame_cap() -> None:
    with pytest.raises(LimitExceeded):
        encode_step({"x": "a" * (16 * 1024 * 1024)})


def test_observation_decodes_with_tagged_reward() -> None:
    frame = decode_server_frame(
        '{"type":"observation","data":{"observation":{"total":2},"reward":2.0,"done":false}}'
    )
    assert frame == Observation({"total": 2}, Reward("float", 2.0), False, None)
    with_meta = decode_server_frame(
        '{"type":"observation","data":{"observation":{},"reward":1,"done":true,"metadata":{"a":1}}}'
    )
    assert isinstance(with_meta, Observation)
    assert with_meta.reward == Reward("integer", 1)
    assert with_meta.metadata == {"a": 1}


@pytest.mark.parametrize(
    "data",
    [
        '{"observation":{},"reward":null,"done":false,"extra":1}',
        '{"observation":{},"reward":null}',
        '{"observation":[],"reward":null,"done":false}',
        '{"observation":{},"reward":"1.0","done":false}',
        '{"observation":{},"reward":null,"done":1}',
        '{"observation":{},"reward":null,"done":false,"metadata":[]}',
    ],
)
def test_observation_data_is_closed_and_typed(data: str) -> None:
    with pytest.raises(ProtocolViolation):
        decode_server_frame('{"type":"observation","data":' + data + "}")


def test_state_and_error_frames() -> None:
    assert decode_server_frame('{"type":"state","data":{"step_count":2}}') == StateResult(
        {"step_count": 2}
    )
    error = decode_server_frame(
        '{"type":"error","data":{"code":"CAPACITY_REACHED","message":"full",'
        '"active_sessions":1,"max_sessions":1}}'
    )
    assert isinstance(error, ProtocolError)
    assert error.is_terminal
    assert not error.recoverable
    assert (error.active_sessions, error.max_sessions) == (1, 1)
    long = decode_server_frame(
        json.dumps({"type": "error", "data": {"code": "EXECUTION_ERROR", "message": "x" * 5000}})
    )
    assert isinstance(long, ProtocolError)
    assert len(long.message) == MAX_PROTOCOL_MESSAGE_CHARS
    assert long.recoverable


def test_terminal_split_matches_kiln() -> None:
    terminal = {code for code in ErrorCode if code.is_terminal}
    assert terminal == {"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"}
    assert len(ErrorCode) == 7


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"mystery","data":{}}',
        '{"type":"error","data":{"code":"NOPE","message":"x"}}',
        '{"type":"error","data":{"code":"EXECUTION_ERROR"}}',
        '{"type":"state"}',
        '{"type":"state","data":{},"id":1}',
        "[1,2]",
        "not json",
        '{"type":"state","data":{},"data":{}}',
        '{"type":"state","data":NaN}',
        b"\xff\xfe",
    ],
)
def test_protocol_violations(text: str | bytes) -> None:
    with pytest.raises(ProtocolViolation):
        decode_server_frame(text)


def test_server_frame_cap_boundary() -> None:
    prefix, suffix = '{"type":"state","data":"', '"}'
    fill = MAX_SERVER_FRAME_BYTES - len(prefix) - len(suffix)
    assert isinstance(decode_server_frame(prefix + "a" * fill + suffix), StateResult)
    with pytest.raises(ProtocolViolation, match="MAX_SERVER_FRAME_BYTES"):
        decode_server_frame(prefix + "a" * (fill + 1) + suffix)


def test_response_type_check() -> None:
    observation = Observation({}, Reward("null", None), False)
    state = StateResult({})
    error = ProtocolError(ErrorCode.EXECUTION_ERROR, "boom")
    assert check_response(RequestKind.STEP, observation) is observation
    assert check_response(RequestKind.RESET, error) is error
    assert check_response(RequestKind.STATE, state) is state
    with pytest.raises(UnexpectedResponse):
        check_response(RequestKind.STEP, state)
    with pytest.raises(UnexpectedResponse):
        check_response(RequestKind.STATE, observation)


# --- tagged reward ---------------------------------------------------------------------------


def test_reward_tags_are_distinct() -> None:
    assert Reward.from_json(1) != Reward.from_json(1.0)
    assert Reward.from_json(True) != Reward.from_json(1)
    assert Reward.from_json(False) != Reward.from_json(0)
    assert Reward.from_json(None) != Reward.from_json(0.0)
    assert len({Reward.from_json(1), Reward.from_json(1.0), Reward.from_json(True)}) == 3
    assert Reward.from_json(2.0) == Reward("float", 2.0)


@pytest.mark.parametrize(
    ("value", "training"),
    [(None, 0.0), (False, 0.0), (True, 1.0), (3, 3.0), (-1, -1.0), (0.5, 0.5)],
)
def test_training_value(value: Any, training: float) -> None:
    assert Reward.from_json(value).training_value == training


def test_reward_integer_range_and_non_finite() -> None:
    assert Reward.from_json(2**63 - 1).kind == "integer"
    assert Reward.from_json(2**63) == Reward("float", float(2**63))
    with pytest.raises(ProtocolViolation):
        Reward.from_json(10**400)
    for bad in (math.nan, math.inf, -math.inf, "1", [1], {"r": 1}):
        with pytest.raises(ProtocolViolation):
            Reward.from_json(bad)
    with pytest.raises(ProtocolViolation):
        Reward("integer", 1.0)


def test_negative_zero_spellings() -> None:
    """`-0` is the float -0.0, as serde_json (Kiln) reads it, not Python's int 0
    (docs/byte-rules.md); `-0.0` stays a float."""
    frame = decode_server_frame(
        '{"type":"observation","data":{"observation":{},"reward":-0,"done":false}}'
    )
    assert isinstance(frame, Observation)
    assert frame.reward.kind == "float"
    assert isinstance(frame.reward.value, float)
    assert math.copysign(1.0, frame.reward.value) == -1.0
    frame = decode_server_frame(
        '{"type":"observation","data":{"observation":{},"reward":-0.0,"done":false}}'
    )
    assert isinstance(frame, Observation)
    assert frame.reward.kind == "float"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200)))
def test_decoding_arbitrary_input_raises_only_kiln_errors(data: bytes | str) -> None:
    with contextlib.suppress(KilnError):
        decode_server_frame(data)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["observation", "state", "error", "mcp", ""]),
    st.dictionaries(
        st.sampled_from(["observation", "reward", "done", "metadata", "code", "message", "x"]),
        json_values,
        max_size=5,
    ),
)
def test_decoding_structured_input_raises_only_kiln_errors(kind: str, data: dict[str, Any]) -> None:
    with contextlib.suppress(KilnError):
        decode_server_frame(json.dumps({"type": kind, "data": data}))


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False)))
def test_reward_roundtrip_and_training_value(value: Any) -> None:
    try:
        reward = Reward.from_json(value)
    except ProtocolViolation:
        assert (isinstance(value, float) and not math.isfinite(value)) or isinstance(value, int)
        return
    assert Reward.from_json(reward.to_json()) == reward
    assert math.isfinite(reward.training_value)
    assert hash(reward) == hash(Reward.from_json(value))
