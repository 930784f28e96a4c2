"""Differential tests over `WS /ws`: our oracle versus an openenv 0.10.0 server, frame by frame.

The same script of byte-exact frames (good and malformed) goes to our oracle server and to
the openenv peer hosting the same game (`openenv_peers.py`: openenv's own `create_app`
serving our game logic). Every reply frame must be identical -- same bytes for
observations and states, same type, code, message and `data` keys for errors, the same
pydantic `errors` entries for validation errors -- and the socket must close at the same
point with the same code. Each script also states what openenv itself answers, so a change
in the reference package shows up as a failure of the expectation, not as a silent
agreement of two changed servers.

No normalisation is needed: even the texts that embed a Python exception string
(`INVALID_JSON`'s decoder message, `SESSION_ERROR`'s "'list' object has no attribute
'get'", the JSON-RPC -32600 rendering of a pydantic `ValidationError`) match byte for byte,
so every frame is compared verbatim. The one masked value is a fresh uuid4 session id
(WS `/mcp` `openenv/session/create`), checked for its shape first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("openenv")

from .conftest import Pair
from .wsprobe import (
    Event,
    Frame,
    Transcript,
    exchange,
    open_session,
    run_script,
    unsolicited,
    ws_url,
)

pytestmark = pytest.mark.interop

CLOSE = '{"type":"close"}'


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A script of frames for one server pair, and what openenv answers to each frame."""

    id: str
    key: str
    frames: tuple[Frame, ...]
    #: Per frame sent: the reply's `type` (or error `code`), or `closed 1000` when the frame
    #: met the server's close instead of a reply (nothing after it is sent).
    expect: tuple[str, ...]


def _reset(data: Any = None) -> str:
    return json.dumps(
        {"type": "reset"} | ({} if data is None else {"data": data}), separators=(",", ":")
    )


def _step(data: Any) -> str:
    return json.dumps({"type": "step", "data": data}, separators=(",", ":"))


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "counter-episode",
        "counter",
        (
            _reset({"seed": 17, "episode_id": "kiln-interop"}),
            _step({"amount": 2, "note": "first"}),
            _step({"amount": 2, "note": "second"}),
            '{"type":"state"}',
            _step({"amount": 1}),  # after done: frozen observation, reward null
            '{"type":"state"}',
            CLOSE,
        ),
        (
            "observation",
            "observation",
            "observation",
            "state",
            "observation",
            "state",
            "closed 1000",
        ),
    ),
    Scenario(
        "fresh-session",
        "counter",
        (
            '{"type":"state"}',
            _step({"amount": 1}),  # step before any reset is not rejected by the server
            '{"type":"state"}',
            CLOSE,
        ),
        ("state", "observation", "state", "closed 1000"),
    ),
    Scenario(
        "reset-variants",
        "counter",
        (
            '{"type":"reset"}',
            '{"type":"reset","data":{}}',
            # Unknown reset keys are dropped silently.
            '{"type":"reset","data":{"seed":5,"episode_id":"e","bogus":[1,2]}}',
            '{"type":"reset","data":[]}',
            '{"type":"reset","data":"seed"}',
            '{"type":"reset","data":null}',
            '{"type":"reset","data":5}',
            '{"type":"reset","data":{"seed":-5}}',  # not validated on WS: the game refuses it
            '{"type":"reset","data":{"seed":"abc"}}',
            '{"type":"reset","data":{"seed":1.5}}',
            '{"type":"reset","data":{"seed":18446744073709551616}}',
            '{"type":"reset","data":{"seed":3},"extra":true}',
            '{"type":"state"}',
            CLOSE,
        ),
        (
            "observation",
            "observation",
            "observation",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "EXECUTION_ERROR",
            "EXECUTION_ERROR",
            "EXECUTION_ERROR",
            "EXECUTION_ERROR",
            "VALIDATION_ERROR",
            "state",
            "closed 1000",
        ),
    ),
    Scenario(
        "step-validation",
        "counter",
        (
            _reset({"seed": 1}),
            _step({"amount": "abc"}),
            _step({"amount": [1]}),
            _step({"amount": 1.5}),
            _step({"amount": {"n": 1}}),
            _step({"amount": None}),
            _step({}),
            _step({"amount": 1, "bogus": 2, "other": None}),
            _step({"note": 5}),
            _step({"amount": 1, "metadata": []}),
            '{"type":"step"}',
            '{"type":"step","data":[]}',
            '{"type":"step","data":null}',
            '{"type":"step","data":"amount"}',
            '{"type":"step","data":{"amount":1},"extra":1}',
            '{"type":"step","data":{"amount":NaN}}',
            '{"type":"step","data":{"amount":1,"note":null,"metadata":{"k":[1,"x"]}}}',
            '{"type":"state"}',
            CLOSE,
        ),
        ("observation",) + ("VALIDATION_ERROR",) * 15 + ("observation", "state", "closed 1000"),
    ),
    Scenario(
        "strict-action-types",
        "counter",
        # The oracle documents its action fields as strict (pydantic StrictInt/StrictStr); the
        # peer declares them so. These are what plain `int` would have coerced.
        (
            _reset(),
            _step({"amount": "5"}),
            _step({"amount": 5.0}),
            _step({"amount": True}),
            _step({"amount": 1, "note": 7}),
            CLOSE,
        ),
        (
            "observation",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "closed 1000",
        ),
    ),
    Scenario(
        "envelope",
        "counter",
        (
            "{bad",
            "",
            '{"type":"nope"}',
            '{"data":{}}',
            '{"type":"Reset"}',
            '{"type":"STATE"}',
            '{"type":5}',
            '{"type":null}',
            '{"type":"state","data":{}}',
            '{"type":"state","extra":1}',
            '{"type":"close","data":{}}',  # a VALIDATION_ERROR, and the socket stays open
            '{"type":"reset","type":"state"}',  # duplicate keys: the last one wins
            '  {"type":"state"}  ',
            '{"type":"state"}',
            CLOSE,
        ),
        (
            "INVALID_JSON",
            "INVALID_JSON",
            "UNKNOWN_TYPE",
            "UNKNOWN_TYPE",
            "UNKNOWN_TYPE",
            "UNKNOWN_TYPE",
            "UNKNOWN_TYPE",
            "UNKNOWN_TYPE",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "state",
            "state",
            "state",
            "closed 1000",
        ),
    ),
    Scenario(
        "mcp",
        "counter",
        (
            '{"type":"mcp","data":{"jsonrpc":"2.0","method":"tools/list","id":1}}',
            '{"type":"mcp","data":{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"},"id":"a"}}',
            '{"type":"mcp","data":{"jsonrpc":"2.0","method":"nope","id":2}}',
            '{"type":"mcp","data":{"jsonrpc":"2.0","method":"tools/list","params":[],"id":3}}',
            '{"type":"mcp","data":{}}',
            '{"type":"mcp"}',
            '{"type":"mcp","data":[]}',
            CLOSE,
        ),
        ("mcp", "mcp", "mcp", "mcp", "mcp", "VALIDATION_ERROR", "VALIDATION_ERROR", "closed 1000"),
    ),
    Scenario(
        "unicode-bytes",
        "counter",
        (
            _reset({"seed": 2, "episode_id": "ünï-😀-\u2028"}),
            '{"type":"state"}',
            _step({"amount": 1, "note": "naïve ☃"}),
            '{"type":"step","data":{"amount":1,"note":"\\u00e9\\ud83d\\ude00"}}',
            CLOSE,
        ),
        ("observation", "state", "observation", "observation", "closed 1000"),
    ),
    Scenario(
        "bandit-execution-error",
        "bandit",
        (
            _step({"arm": 0}),  # step before any reset: the game refuses it
            _reset({"seed": 41}),
            _step({"arm": 99}),
            _step({"arm": -1}),
            *(_step({"arm": pull % 10}) for pull in range(20)),
            _step({"arm": 3}),  # after done
            '{"type":"state"}',
            _reset({"seed": 41, "difficulty": "hard", "split": "train"}),
            '{"type":"state"}',
            _reset({"difficulty": 9}),
            CLOSE,
        ),
        (
            "EXECUTION_ERROR",
            "observation",
            "EXECUTION_ERROR",
            "EXECUTION_ERROR",
            *("observation",) * 21,
            "state",
            "observation",
            "state",
            "EXECUTION_ERROR",
            "closed 1000",
        ),
    ),
    Scenario(
        "algebra-episode",
        "algebra",
        (
            _reset({"seed": 20003, "difficulty": 3}),
            _step({"answer": 7}),
            _step({"answer": "definitely wrong"}),
            _step({"answer": "again"}),  # after done: frozen, reward null
            '{"type":"state"}',
            _reset({"split": "test", "index": 12}),
            '{"type":"state"}',
            _reset({"split": "nope"}),
            _reset({"index": 3}),
            _reset({"split": "train", "index": 200}),
            CLOSE,
        ),
        (
            "observation",
            "VALIDATION_ERROR",
            "observation",
            "observation",
            "state",
            "observation",
            "state",
            "EXECUTION_ERROR",
            "EXECUTION_ERROR",
            "EXECUTION_ERROR",
            "closed 1000",
        ),
    ),
    *(
        Scenario(
            f"terminal-{label}",
            "counter",
            (_reset({"seed": 1}), frame, '{"type":"state"}'),
            # The error frame answers the bad frame; the next frame meets the close.
            ("observation", "SESSION_ERROR", "closed 1000"),
        )
        for label, frame in (
            ("list", "[]"),
            ("array", "[1,2]"),
            ("int", "42"),
            ("null", "null"),
            ("string", '"reset"'),
            ("bool", "true"),
            ("binary", b'{"type":"state"}'),
            ("deep-nesting", "[" * 100_000),
        )
    ),
    Scenario(
        "close-ends-the-session",
        "counter",
        (_reset({"seed": 1}), CLOSE, '{"type":"state"}'),
        ("observation", "closed 1000"),
    ),
)


def summary(transcript: Transcript) -> list[str]:
    """Per frame sent: the reply type or error code, and whether the socket then closed."""
    out = []
    for reply in transcript.replies:
        parts = []
        for event in reply:
            if event.kind == "closed":
                parts.append(f"closed {event.code}")
            elif event.kind == "silent":
                parts.append("silent")
            else:
                frame = event.json()
                parts.append(frame["data"]["code"] if frame["type"] == "error" else frame["type"])
        out.append(" +".join(parts))
    return out


def exact(transcript: Transcript) -> list[list[str]]:
    """Each reply verbatim: the frame text as received, or `<closed CODE>` / `<silent>`."""
    return [
        [event.text if event.kind == "frame" else f"<{event.kind} {event.code}>" for event in reply]
        for reply in transcript.replies
    ]


def run_both(pair: Pair, frames: Sequence[Frame]) -> tuple[Transcript, Transcript]:
    async def both() -> tuple[Transcript, Transcript]:
        ours = await run_script(pair.ours, frames)
        theirs = await run_script(pair.openenv, frames)
        return ours, theirs

    return asyncio.run(both())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_same_frames_as_openenv(pairs: dict[str, Pair], scenario: Scenario) -> None:
    ours, theirs = run_both(pairs[scenario.key], scenario.frames)
    assert summary(theirs) == list(scenario.expect), "openenv 0.10.0 itself answered otherwise"
    assert summary(ours) == summary(theirs)
    # Not compared: `unsent`. Whether the frame after a terminal error is still written
    # (into a socket the server is closing) or already refused is a race in the client.
    assert exact(ours) == exact(theirs)


def test_validation_error_entries_name_type_and_loc(pairs: dict[str, Pair]) -> None:
    """The `errors` entries a client matches on: keys, `type` and `loc`, entry by entry."""
    frames = (_step({"amount": "abc", "bogus": 1}), '{"type":"step"}', CLOSE)
    ours, theirs = run_both(pairs["counter"], frames)
    for mine, reference in zip(ours.frames()[:2], theirs.frames()[:2], strict=True):
        assert mine["data"].keys() == reference["data"].keys() == {"message", "code", "errors"}
        assert [sorted(e) for e in mine["data"]["errors"]] == [
            sorted(e) for e in reference["data"]["errors"]
        ]
        assert [(e["type"], e["loc"]) for e in mine["data"]["errors"]] == [
            (e["type"], e["loc"]) for e in reference["data"]["errors"]
        ]
    assert [(e["type"], e["loc"]) for e in theirs.frames()[0]["data"]["errors"]] == [
        ("int_type", ["amount"]),
        ("extra_forbidden", ["bogus"]),
    ]
    assert [(e["type"], e["loc"]) for e in theirs.frames()[1]["data"]["errors"]] == [
        ("missing", ["data"]),
    ]


def test_pipelined_frames_are_answered_in_order(pairs: dict[str, Pair]) -> None:
    """Three requests written back-to-back get three replies, in order, on both servers."""
    frames = [_reset({"seed": 9}), _step({"amount": 1}), '{"type":"state"}']

    async def pipelined(base_url: str) -> list[str]:
        ws = await open_session(base_url)
        try:
            for frame in frames:
                await ws.send(frame)
            replies = [str(await asyncio.wait_for(ws.recv(), 10)) for _ in frames]
            await ws.send(CLOSE)
            return replies
        finally:
            await ws.close()

    pair = pairs["counter"]
    ours = asyncio.run(pipelined(pair.ours))
    theirs = asyncio.run(pipelined(pair.openenv))
    assert ours == theirs
    kinds = [json.loads(reply)["type"] for reply in theirs]
    assert kinds == ["observation", "observation", "state"]


def test_capacity_reached_is_the_only_frame_then_close_1000(pairs: dict[str, Pair]) -> None:
    pair = pairs["capacity"]

    async def refused(base_url: str) -> tuple[list[Event], list[Event], Transcript]:
        holder = await open_session(base_url)
        try:
            held = await exchange(holder, [_reset({"seed": 1})])
            assert held.events()[0].json()["type"] == "observation"
            second = await open_session(base_url)  # the upgrade itself succeeds
            try:
                events = await unsolicited(second)
            finally:
                await second.close()
            # The holder's session is unaffected by the refusal.
            still = await exchange(holder, ['{"type":"state"}', CLOSE])
        finally:
            await holder.close()
        return events, list(still.events()), await _admitted(base_url)

    ours_refused, ours_holder, ours_after = asyncio.run(refused(pair.ours))
    theirs_refused, theirs_holder, theirs_after = asyncio.run(refused(pair.openenv))

    assert [e.kind for e in theirs_refused] == ["frame", "closed"]
    assert theirs_refused[1].code == 1000
    reference = theirs_refused[0].json()
    assert reference["data"]["code"] == "CAPACITY_REACHED"
    assert reference["data"].keys() == {"message", "code", "active_sessions", "max_sessions"}
    assert ours_refused == theirs_refused  # byte-identical frame, same close code
    assert [e.kind for e in ours_holder] == [e.kind for e in theirs_holder] == ["frame", "closed"]
    assert summary(ours_after) == summary(theirs_after) == ["observation", "closed 1000"]


async def _admitted(base_url: str, attempts: int = 100) -> Transcript:
    """Reset in a new session once the freed slot is visible (release is asynchronous)."""
    for _ in range(attempts):
        transcript = await run_script(base_url, [_reset({"seed": 3}), CLOSE])
        first = transcript.events()[0]
        if first.kind == "frame" and first.json()["type"] == "observation":
            return transcript
        await asyncio.sleep(0.05)
    raise AssertionError(f"{base_url} never admitted a new session after the holder left")


def test_unknown_session_id_query_is_a_session_error(pairs: dict[str, Pair]) -> None:
    """`/ws?session_id=X` attaches to an HTTP MCP session; an unknown id is terminal."""
    from websockets.asyncio.client import connect

    async def attach(base_url: str) -> list[Event]:
        async with connect(ws_url(base_url) + "?session_id=nope", proxy=None) as ws:
            return await unsolicited(ws)

    pair = pairs["counter"]
    ours = asyncio.run(attach(pair.ours))
    theirs = asyncio.run(attach(pair.openenv))
    assert [e.kind for e in theirs] == ["frame", "closed"]
    assert theirs[0].json()["data"] == {
        "message": "Unknown session_id: nope",
        "code": "SESSION_ERROR",
    }
    assert ours == theirs


DEFLATE_DEFAULT = (
    "deliberate oracle difference (oracle/runner.py ServerConfig.per_message_deflate=False): "
    "the oracle declines the client's permessage-deflate offer by default, while openenv "
    "0.10.0 under uvicorn's defaults accepts it (Sec-WebSocket-Extensions in the 101)"
)


async def _upgrade_headers(base_url: str) -> dict[str, str]:
    """The 101 response headers that are not per-connection (date, accept key)."""
    skip = {"date", "sec-websocket-accept"}
    ws = await open_session(base_url)
    try:
        assert ws.response is not None
        headers = ws.response.headers.raw_items()
        return {k.lower(): v for k, v in headers if k.lower() not in skip}
    finally:
        await ws.close()


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("counter", marks=pytest.mark.xfail(strict=True, reason=DEFLATE_DEFAULT)),
        "deflate",  # our runner with per_message_deflate=True
    ],
)
def test_upgrade_negotiates_the_same_extensions(pairs: dict[str, Pair], key: str) -> None:
    """The 101 response: same `Upgrade`/`Connection`/extension negotiation."""
    pair = pairs[key]
    theirs = asyncio.run(_upgrade_headers(pair.openenv))
    assert theirs["sec-websocket-extensions"].startswith("permessage-deflate")
    assert asyncio.run(_upgrade_headers(pair.ours)) == theirs


def test_deflated_session_frames_are_identical(pairs: dict[str, Pair]) -> None:
    """With compression negotiated on both sides, the decoded frames still match exactly."""
    frames = [
        _reset({"seed": 17, "episode_id": "kiln-interop"}),
        _step({"amount": 2}),
        '{"type":"state"}',
        "{bad",
        CLOSE,
    ]
    ours, theirs = run_both(pairs["deflate"], frames)
    assert exact(ours) == exact(theirs)


def test_oversized_frame_closes_with_1009(pairs: dict[str, Pair]) -> None:
    """uvicorn's 16 MiB inbound limit applies on both sides: close 1009, no reply frame."""
    frame = '{"type":"step","data":{"note":"' + "x" * (16 * 1024 * 1024) + '"}}'
    ours, theirs = run_both(pairs["counter"], [_reset({"seed": 1}), frame, '{"type":"state"}'])
    assert summary(theirs)[1:] in (["closed 1009"], ["closed 1009", "closed 1009"])
    assert exact(ours) == exact(theirs)


def test_abrupt_disconnect_frees_the_slot(pairs: dict[str, Pair]) -> None:
    """A client that vanishes without `close` still releases its session (max sessions 1)."""

    async def vanish_then_reconnect(base_url: str) -> Transcript:
        ws = await open_session(base_url)
        await exchange(ws, [_reset({"seed": 5})])
        ws.transport.abort()  # TCP reset: no close frame, no close message
        return await _admitted(base_url)

    pair = pairs["capacity"]
    ours = asyncio.run(vanish_then_reconnect(pair.ours))
    theirs = asyncio.run(vanish_then_reconnect(pair.openenv))
    assert exact(ours) == exact(theirs)


@pytest.mark.parametrize("path", ["/ws/", "/nope", "/mcp/x"])
def test_websocket_upgrade_on_other_paths_is_refused_alike(
    pairs: dict[str, Pair], path: str
) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    async def refusal(base_url: str) -> int:
        url = base_url.replace("http://", "ws://", 1) + path
        with pytest.raises(InvalidStatus) as raised:
            async with connect(url, proxy=None):
                pass
        return raised.value.response.status_code

    pair = pairs["counter"]
    assert asyncio.run(refusal(pair.ours)) == asyncio.run(refusal(pair.openenv))


def test_mcp_websocket_route(pairs: dict[str, Pair]) -> None:
    """WS /mcp: one JSON-RPC 2.0 response frame per request frame (a session per socket)."""
    from websockets.asyncio.client import connect

    frames: list[Frame] = [
        '{"jsonrpc":"2.0","method":"tools/list","id":1}',
        '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"},"id":2}',
        "{bad",
        '{"jsonrpc":"2.0","method":"nope","id":3}',
        "{}",
        '{"jsonrpc":"2.0","method":"tools/list","params":[],"id":4}',
        '{"jsonrpc":"2.0","method":"openenv/session/close","params":{},"id":5}',
        '{"jsonrpc":"2.0","method":"openenv/session/close","params":{"session_id":"zz"},"id":6}',
        '{"jsonrpc":"2.0","method":"openenv/session/create","id":7}',  # this socket's session
        "[]",  # not an object: a server error, then the socket closes
        '{"jsonrpc":"2.0","method":"tools/list","id":8}',
    ]

    async def replies(base_url: str) -> list[list[str]]:
        url = base_url.replace("http://", "ws://", 1) + "/mcp"
        async with connect(url, proxy=None) as ws:
            return exact(await exchange(ws, frames))

    def without_session_id(reply: list[str]) -> list[str]:
        # A fresh uuid4 on each server: checked for shape, then masked.
        body = json.loads(reply[0])
        assert uuid.UUID(body["result"]["session_id"]).version == 4
        return [reply[0].replace(body["result"]["session_id"], "<uuid4>")]

    pair = pairs["counter"]
    theirs = asyncio.run(replies(pair.openenv))
    codes = [json.loads(reply[0]).get("error", {}).get("code") for reply in theirs[:9]]
    assert codes == [-32603, -32603, -32700, -32601, -32600, -32600, -32602, -32602, None]
    assert json.loads(theirs[9][0])["error"]["code"] == -32000
    assert theirs[10] == ["<closed 1000>"]
    ours = asyncio.run(replies(pair.ours))
    assert without_session_id(ours[8]) == without_session_id(theirs[8])
    assert ours[:8] + ours[9:] == theirs[:8] + theirs[9:]


def test_factory_error_is_the_only_frame_then_close_1000(pairs: dict[str, Pair]) -> None:
    """A failing environment factory: `FACTORY_ERROR` with `factory_name`, then close 1000."""

    async def refused(base_url: str) -> list[Event]:
        ws = await open_session(base_url)
        try:
            return await unsolicited(ws)
        finally:
            await ws.close()

    pair = pairs["factory-error"]
    theirs = asyncio.run(refused(pair.openenv))
    assert [e.kind for e in theirs] == ["frame", "closed"]
    assert theirs[0].json()["data"] == {
        "message": "Environment factory 'CounterEnvironment' failed to create instance.",
        "code": "FACTORY_ERROR",
        "factory_name": "CounterEnvironment",
    }
    assert theirs[1].code == 1000
    assert asyncio.run(refused(pair.ours)) == theirs
