"""The frame decoder's ``orjson`` tier returns exactly what the strict route returns.

``decode_server_frame`` first tries ``canonical_value`` on the frame's UTF-8 bytes and
keeps the value only when ``orjson`` writes those bytes back identically; everything else
goes through ``loads_object``, which alone decides errors. Each frame below is decoded both
ways: the same typed reply (reward tags and float bits included), or the same error code
and message.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.core.jsonio import dumps_compact
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_JSON_DEPTH, MAX_SERVER_FRAME_BYTES
from kiln_verify.openenv.protocol import wire
from kiln_verify.openenv.protocol.wire import Observation, decode_server_frame


def _strict(text: str | bytes) -> wire.ServerFrame:
    return wire._classify(wire._strict_frame(text))


def _fingerprint(value: Any) -> Any:
    """Equality that also tells 1 from 1.0 from True and 0.0 from -0.0."""
    if isinstance(value, dict):
        return ("dict", [(k, _fingerprint(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_fingerprint(v) for v in value])
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, value)


def _outcome(decode: Any, text: str | bytes) -> Any:
    try:
        frame = decode(text)
    except KilnError as exc:
        return ("error", exc.code, str(exc))
    if isinstance(frame, Observation):
        return (
            "observation",
            _fingerprint(frame.observation),
            frame.reward,
            _fingerprint(frame.reward.value),
            frame.done,
            _fingerprint(frame.metadata),
        )
    return (type(frame).__name__, _fingerprint(getattr(frame, "data", None)), repr(frame))


def _observation(payload: Any, reward: str = "1", metadata: str = "") -> str:
    extra = f',"metadata":{metadata}' if metadata else ""
    text: str = (
        '{"type":"observation","data":{"observation":'
        + payload
        + f',"reward":{reward},"done":false{extra}}}}}'
    )
    return text


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


FRAMES: list[str | bytes] = [
    _observation('{"input_text":"pick","legal_actions":[0,1,2],"metadata":{}}'),
    _observation('{"a":1}', reward="1.0"),
    _observation('{"a":1}', reward="-0.0"),
    _observation('{"a":1}', reward="-0"),
    _observation('{"a":1}', reward="true"),
    _observation('{"a":1}', reward="null", metadata='{"m":[1,2.5]}'),
    _observation('{"a":1}', reward="1e400"),
    _observation('{"a":1}', reward="1e5"),
    _observation('{"a":1}', reward=str(2**64)),
    _observation('{"a":1,"a":2}'),
    _observation('{"a":NaN}'),
    _observation('{"a":"\\ud800"}'),
    _observation('{"a":"\\u00e9"}'),
    _observation('{"a":"é/\\n"}'),
    _observation('{"a":"\\/"}'),
    _observation('{"a":' + _deep(MAX_JSON_DEPTH - 2) + "}"),
    _observation('{"a":' + _deep(MAX_JSON_DEPTH - 1) + "}"),
    _observation('{"a":' + _deep(MAX_JSON_DEPTH) + "}"),
    _observation('{"a":"' + "[" * 300 + '"}'),
    _observation('{"a":1}') + "\n",
    _observation('{"a":1}') + " x",
    "\ufeff" + _observation('{"a":1}'),
    '{"type": "observation", "data": {"observation": {"a": 1}, "reward": 1, "done": false}}',
    '{"data":{"observation":{},"reward":1,"done":true},"type":"observation"}',
    '{"type":"observation","data":{"observation":{},"reward":1,"done":true},"x":1}',
    '{"type":"observation"}',
    '{"type":"state","data":{"step_count":3,"seed":1}}',
    '{"type":"state","data":[1,2]}',
    '{"type":"error","data":{"code":"EXECUTION_ERROR","message":"no"}}',
    '{"type":"error","data":{"code":"NOPE","message":"no"}}',
    '{"type":"elsewhere","data":{}}',
    "[1,2]",
    "1",
    "",
    _observation('{"a":1}').encode("utf-8"),
    _observation('{"a":"\\u00e9"}').encode("utf-8"),
    b'{"type":"state","data":"\xff"}',
    _observation('{"t":"' + "x" * (MAX_SERVER_FRAME_BYTES - 80) + '"}'),
    _observation('{"t":"' + "é" * (MAX_SERVER_FRAME_BYTES // 2) + '"}'),
]


@pytest.mark.parametrize("text", FRAMES)
def test_fast_tier_agrees_with_the_strict_route(text: str | bytes) -> None:
    assert _outcome(decode_server_frame, text) == _outcome(_strict, text)


@settings(max_examples=400, deadline=None)
@given(
    st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(2**70), max_value=2**70),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=8),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=12,
    ),
    st.sampled_from(["compact", "orjson-like", "python"]),
)
def test_generated_frames_agree(payload: Any, spelling: str) -> None:
    data = {"observation": {"p": payload}, "reward": 1, "done": False}
    frame = {"type": "observation", "data": data}
    if spelling == "python":
        text = json.dumps(frame, ensure_ascii=False)
    else:
        text = dumps_compact(frame).decode("utf-8")
    assert _outcome(decode_server_frame, text) == _outcome(_strict, text)


def test_our_servers_frames_take_the_fast_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str | bytes) -> dict[str, Any]:
        raise AssertionError("the strict route ran")

    monkeypatch.setattr(wire, "_strict_frame", refuse)
    frame = decode_server_frame(
        _observation('{"input_text":"é \\"x\\"","n":[1,2.5,-0.0]}', reward="0.25")
    )
    assert isinstance(frame, Observation)
    assert frame.observation == {"input_text": 'é "x"', "n": [1, 2.5, -0.0]}
    assert frame.reward.kind == "float"


@pytest.mark.parametrize("value", [None, True, False, 0, 1, -16, 256, -17, 257, 1.0, -0.0, 0.0])
def test_shared_rewards_are_the_rewards_from_json_builds(value: Any) -> None:
    reward = wire.Reward.from_json(value)
    kind = {type(None): "null", bool: "bool", int: "integer", float: "float"}[type(value)]
    assert (reward.kind, _fingerprint(reward.value)) == (kind, _fingerprint(value))
    assert reward == wire.Reward(kind, value)  # type: ignore[arg-type]

    class Tagged(wire.Reward):
        pass

    assert type(Tagged.from_json(value)) is Tagged  # subclasses still get their own class
