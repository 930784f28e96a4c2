"""Fault profiles: each one parsed, then provoked with a raw `websockets` client or httpx."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK, InvalidStatus

from oracle.context import IGNORED_SEED_BASE
from oracle.envs.maze import MazeEnvironment
from oracle.faults import (
    DEFAULT_OVERSIZED_BYTES,
    DEFAULT_UNSOLICITED_SECONDS,
    FaultError,
    Faults,
    parse_faults,
)
from tests.oracle.serverkit import (
    RawSocket,
    Start,
    ask,
    error_code,
    expect_close,
    open_ws,
    receive,
    send,
    wait_until,
)

RESET: dict[str, Any] = {"type": "reset", "data": {"seed": 3}}
STEP: dict[str, Any] = {"type": "step", "data": {"amount": 1}}
KIB = 1024


# -- parsing ---------------------------------------------------------------------------------


def test_parse_every_profile() -> None:
    faults = parse_faults(
        [
            "drop-after-steps=3",
            "binary-frame",
            "oversized-frame",
            "wrong-response-type",
            "unsolicited-frame=0.5",
            "idle-close=2",
            "delay-step=0.25",
            "reflect-authorization",
            "require-bearer=ORACLE_TOKEN",
            "identity-drift=2",
            "nondeterministic-reset",
            "ignore-seed",
            "ignore-episode-id",
            "unseeded-hidden-state",
            "flaky-capacity=4",
            "factory-error",
            "inventory-status=404",
        ]
    )
    assert faults == Faults(
        drop_after_steps=3,
        binary_frame=True,
        oversized_frame=DEFAULT_OVERSIZED_BYTES,
        wrong_response_type=True,
        unsolicited_frame=0.5,
        idle_close=2.0,
        delay_step=0.25,
        reflect_authorization=True,
        require_bearer="ORACLE_TOKEN",
        identity_drift=2,
        nondeterministic_reset=True,
        ignore_seed=True,
        ignore_episode_id=True,
        unseeded_hidden_state=True,
        flaky_capacity=4,
        factory_error=True,
        inventory_status=404,
    )
    assert parse_faults(faults.describe()) == faults
    assert parse_faults(["unsolicited-frame"]).unsolicited_frame == DEFAULT_UNSOLICITED_SECONDS
    assert parse_faults(["oversized-frame=600000"]).oversized_frame == 600000
    assert parse_faults([]) == Faults()


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("nope", "unknown fault profile 'nope'"),
        ("drop-after-steps", "needs a value"),
        ("drop-after-steps=-1", "expected an integer >= 0"),
        ("drop-after-steps=1.5", "expected an integer >= 0"),
        ("flaky-capacity=0", "expected an integer >= 1"),
        ("oversized-frame=0", "expected an integer >= 1"),
        ("binary-frame=1", "takes no value"),
        ("delay-step=fast", "expected seconds"),
        ("delay-step=nan", "expected seconds"),
        ("delay-step=-1", "expected seconds"),
        ("require-bearer=s3cr3t-token!", "NAME of an environment variable"),
        ("inventory-status", "needs a value"),
        ("inventory-status=399", "between 400 and 599"),
        ("inventory-status=600", "between 400 and 599"),
        ("inventory-status=4040", "between 400 and 599"),
    ],
)
def test_parse_errors_name_the_fix(profile: str, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        parse_faults([profile])


def test_a_profile_given_twice_is_an_error() -> None:
    with pytest.raises(FaultError, match="given twice"):
        parse_faults(["delay-step=1", "delay-step=2"])


# -- WebSocket faults ------------------------------------------------------------------------


def test_drop_after_steps_drops_tcp_without_close_frame(start: Start) -> None:
    server = start(faults=["drop-after-steps=2"])
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
        assert ask(ws, STEP)["type"] == "observation"
        assert ask(ws, STEP)["type"] == "observation"
        send(ws, STEP)
        expect_close(ws, None)
    wait_until(lambda: server.active_sessions == 0)
    with open_ws(server.ws_url) as ws:  # counted per session
        ask(ws, RESET)
        assert ask(ws, STEP)["type"] == "observation"


def test_binary_frame_answers_a_step_in_binary(start: Start) -> None:
    server = start(faults=["binary-frame"])
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
        send(ws, STEP)
        raw = ws.recv(timeout=5)
        assert isinstance(raw, bytes)
        assert json.loads(raw)["type"] == "observation"


def test_oversized_frame_exceeds_a_512_kib_client_cap(start: Start) -> None:
    server = start(faults=["oversized-frame"])
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
        send(ws, STEP)
        raw = ws.recv(timeout=5)
        assert isinstance(raw, str)
        assert len(raw) > DEFAULT_OVERSIZED_BYTES > 512 * KIB
        assert json.loads(raw)["data"]["observation"]["total"] == 1
    with open_ws(server.ws_url, max_size=512 * KIB) as capped:
        ask(capped, RESET)
        send(capped, STEP)
        with pytest.raises(ConnectionClosedError):
            capped.recv(timeout=5)


def test_wrong_response_type_answers_a_step_with_state(start: Start) -> None:
    server = start(faults=["wrong-response-type"])
    with open_ws(server.ws_url) as ws:
        assert ask(ws, RESET)["type"] == "observation"
        reply = ask(ws, STEP)
        assert reply == {
            "type": "state",
            "data": {"episode_id": "episode-3", "step_count": 1, "total": 1},
        }


def test_unsolicited_frame_arrives_while_idle(start: Start) -> None:
    server = start(faults=["unsolicited-frame=0.05"])
    with open_ws(server.ws_url) as ws:
        first = ask(ws, RESET)
        assert receive(ws, timeout=2) == first  # nobody asked for this one
        assert ask(ws, STEP)["data"]["observation"]["total"] == 1
        send(ws, RESET)
        send(ws, STEP)  # a busy client sees no extra frame
        assert receive(ws)["type"] == "observation"
        assert receive(ws)["data"]["observation"]["total"] == 1
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.2)


def test_idle_close_closes_an_idle_session_with_1001(start: Start) -> None:
    server = start(faults=["idle-close=0.3"], max_sessions=1)
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
        for _ in range(3):  # a busy client is never closed
            time.sleep(0.1)
            assert ask(ws, STEP)["type"] == "observation"
        with pytest.raises(ConnectionClosedOK) as closed:
            ws.recv(timeout=2)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1001
    with open_ws(server.ws_url) as again:  # the slot was freed
        assert ask(again, RESET)["type"] == "observation"


def test_delay_step_delays_only_its_session(start: Start) -> None:
    server = start(faults=["delay-step=0.4"])
    with open_ws(server.ws_url) as slow, open_ws(server.ws_url) as fast:
        ask(slow, RESET)
        started = time.monotonic()
        send(slow, STEP)
        assert ask(fast, RESET)["type"] == "observation"
        assert time.monotonic() - started < 0.3
        assert receive(slow)["type"] == "observation"
        assert time.monotonic() - started >= 0.4


def test_reflect_authorization_copies_the_header(start: Start) -> None:
    server = start(faults=["reflect-authorization"])
    with open_ws(server.ws_url, additional_headers={"Authorization": "Bearer t0k"}) as ws:
        assert ask(ws, RESET)["data"]["observation"]["authorization"] == "Bearer t0k"
        assert "authorization" not in ask(ws, STEP)["data"]["observation"]
    with open_ws(server.ws_url) as ws:
        assert ask(ws, RESET)["data"]["observation"]["authorization"] is None
    reply = httpx.post(server.base_url + "/reset", headers={"Authorization": "Basic x"})
    assert reply.json()["observation"]["authorization"] == "Basic x"


def test_require_bearer_guards_http_and_the_upgrade(
    start: Start, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    token = "s3cr3t-oracle-token"
    monkeypatch.setenv("ORACLE_TEST_TOKEN", token)
    caplog.set_level(logging.DEBUG, logger="uvicorn")
    server = start(faults=["require-bearer=ORACLE_TEST_TOKEN"])
    good = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.base_url) as client:
        for method, path in [
            ("GET", "/health"),
            ("GET", "/metadata"),
            ("GET", "/schema"),
            ("GET", "/openapi.json"),
            ("GET", "/list_environments"),
            ("POST", "/reset"),
            ("GET", "/tiny_env/splits"),
            ("GET", "/nope"),
        ]:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
                reply = client.request(method, path, headers=headers)
                assert reply.status_code == 401, (path, headers)
                assert reply.headers["www-authenticate"] == "Bearer"
                assert set(reply.json()) == {"detail"}
                assert token not in reply.text
        assert client.get("/health", headers=good).json() == {"status": "healthy"}
        assert client.post("/reset", headers=good).status_code == 200
    with pytest.raises(InvalidStatus) as refused:
        open_ws(server.ws_url)
    assert refused.value.response.status_code == 401
    assert server.active_sessions == 0
    with open_ws(server.ws_url, additional_headers=good) as ws:
        assert ask(ws, RESET)["type"] == "observation"
    server_logs = [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith(("uvicorn", "oracle"))
    ]
    assert not any(token in line for line in server_logs)


def test_a_non_ascii_bearer_token_is_the_utf8_bytes_the_server_compares(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server compares the variable's UTF-8 bytes; its own readiness probe sends the
    same bytes, so it becomes ready (a probe that sent latin-1 never did, and one outside
    latin-1 crashed)."""
    token = "clé-ключ-\N{KEY}"
    monkeypatch.setenv("ORACLE_TEST_TOKEN", token)
    server = start(faults=["require-bearer=ORACLE_TEST_TOKEN"])  # ready: the probe passed
    sent = b"Bearer " + token.encode("utf-8")
    health = server.base_url + "/health"
    assert httpx.get(health, headers={b"Authorization": sent}).json() == {"status": "healthy"}
    assert httpx.get(health, headers={b"Authorization": sent[:-1]}).status_code == 401


def test_require_bearer_needs_the_variable_at_startup(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORACLE_MISSING_TOKEN", raising=False)
    with pytest.raises(FaultError, match="ORACLE_MISSING_TOKEN is unset or empty"):
        start(faults=["require-bearer=ORACLE_MISSING_TOKEN"])


def test_identity_drift_after_k_websocket_resets(start: Start) -> None:
    server = start(faults=["identity-drift=1"])
    base = server.base_url

    def identity() -> tuple[str, str]:
        return httpx.get(base + "/metadata").json()["version"], httpx.get(base + "/schema").text

    original = identity()
    assert original[0] == "1.0.0"
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
        httpx.post(base + "/reset")  # HTTP resets do not count
        assert identity() == original
        ask(ws, RESET)
    drifted = identity()
    assert drifted[0] == "1.0.0+drift"
    assert drifted[1] != original[1]
    assert json.loads(drifted[1])["observation"] == json.loads(original[1])["observation"]


def test_nondeterministic_reset_changes_the_same_seed(start: Start) -> None:
    server = start(faults=["nondeterministic-reset"])
    with open_ws(server.ws_url) as ws:
        first = ask(ws, RESET)["data"]["observation"]["input_text"]
        second = ask(ws, RESET)["data"]["observation"]["input_text"]
    assert first != second
    assert first.startswith("total is 0")


def _reset_and_state(ws: Any, data: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    observation = ask(ws, {"type": "reset", "data": data})["data"]["observation"]
    state = ask(ws, {"type": "state"})["data"]
    return observation, state


def test_ignore_seed_plays_a_seed_of_its_own(start: Start) -> None:
    server = start(MazeEnvironment, faults=["ignore-seed"])
    with open_ws(server.ws_url) as ws:
        first, first_state = _reset_and_state(ws, {"seed": 3})
        second, second_state = _reset_and_state(ws, {"seed": 3})
    assert first != second  # another maze for the same seed
    played = (first_state["seed"], second_state["seed"])
    assert played == (IGNORED_SEED_BASE + 1, IGNORED_SEED_BASE + 2)
    # the episode id is still derived from the seed played, not from the one asked for
    assert first_state["episode_id"] == f"episode-{IGNORED_SEED_BASE + 1}"
    reply = httpx.post(f"{server.base_url}/reset", json={"seed": 3}, timeout=5).json()
    assert reply["observation"] not in (first, second)


def test_ignore_episode_id_keeps_no_requested_id(start: Start) -> None:
    server = start(faults=["ignore-episode-id"])
    with open_ws(server.ws_url) as ws:
        _, named = _reset_and_state(ws, {"seed": 3, "episode_id": "run-7"})
        _, unnamed = _reset_and_state(ws, {"seed": 3})
    assert (named["episode_id"], unnamed["episode_id"]) == ("oracle-episode-1", "oracle-episode-2")
    # the game itself still follows the seed
    assert named == {**unnamed, "episode_id": "oracle-episode-1"}


def test_unseeded_hidden_state_shows_only_in_the_state(start: Start) -> None:
    plain = start()
    server = start(faults=["unseeded-hidden-state"])
    with open_ws(plain.ws_url) as ws:
        expected, expected_state = _reset_and_state(ws, {"seed": 3})
    with open_ws(server.ws_url) as ws:
        first, first_state = _reset_and_state(ws, {"seed": 3})
        second, second_state = _reset_and_state(ws, {"seed": 3})
    assert first == second == expected
    assert first_state == {**expected_state, "hidden_draw": 1}
    assert second_state == {**expected_state, "hidden_draw": 2}


def test_flaky_capacity_refuses_every_nth_session(start: Start) -> None:
    server = start(faults=["flaky-capacity=2"], max_sessions=8)
    outcomes = []
    for _ in range(4):
        with open_ws(server.ws_url) as ws:
            try:
                refusal = receive(ws, timeout=0.2)  # a refusal is unsolicited
            except TimeoutError:
                outcomes.append(ask(ws, RESET)["type"])
            else:
                outcomes.append(error_code(refusal))
                assert refusal["data"]["max_sessions"] == 8
                expect_close(ws, 1000)
        wait_until(lambda: server.active_sessions == 0)
    assert outcomes == ["observation", "CAPACITY_REACHED"] * 2


def test_factory_error_is_the_only_frame(start: Start) -> None:
    server = start(faults=["factory-error"])
    with open_ws(server.ws_url) as ws:
        assert receive(ws) == {
            "type": "error",
            "data": {
                "message": "Environment factory 'TinyEnvironment' failed to create instance.",
                "code": "FACTORY_ERROR",
                "factory_name": "TinyEnvironment",
            },
        }
        expect_close(ws, 1000)
    assert server.active_sessions == 0
    base = server.base_url
    for method, path, body in [
        ("GET", "/metadata", None),
        ("POST", "/reset", None),
        ("GET", "/state", None),
        ("GET", "/tiny_env/splits", None),
        ("POST", "/tiny_env/tasks", {"split": "a"}),
        ("POST", "/mcp", {"jsonrpc": "2.0", "method": "tools/list", "id": 1}),
    ]:
        assert httpx.request(method, base + path, json=body).status_code == 500, path
    assert httpx.post(base + "/tiny_env/tasks", json={}).status_code == 422  # checked first
    assert httpx.get(base + "/other/splits").status_code == 404
    assert httpx.get(base + "/health").status_code == 200
    with open_ws(server.ws_url.replace("/ws", "/mcp")) as ws:
        assert json.loads(ws.recv(timeout=5))["error"]["data"] == {
            "factory_name": "TinyEnvironment"
        }
        expect_close(ws, 1000)


# -- no fault leaks a session slot -----------------------------------------------------------


def test_disconnect_during_a_delayed_step_frees_the_slot_after_it(start: Start) -> None:
    server = start(faults=["delay-step=0.3"], max_sessions=1)
    raw = RawSocket(server.port)
    raw.send_text(json.dumps(STEP))
    wait_until(lambda: server.active_sessions == 1)
    raw.close()
    wait_until(lambda: server.active_sessions == 0)
    with open_ws(server.ws_url) as ws:
        assert ask(ws, RESET)["type"] == "observation"


def test_disconnect_while_an_unsolicited_frame_is_pending(start: Start) -> None:
    server = start(faults=["unsolicited-frame=5"], max_sessions=1)
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
    wait_until(lambda: server.active_sessions == 0)


def test_concurrent_faulty_sessions_all_release(start: Start) -> None:
    server = start(faults=["drop-after-steps=1", "delay-step=0.05"], max_sessions=4)

    def episode() -> None:
        with open_ws(server.ws_url) as ws:
            ask(ws, RESET)
            ask(ws, STEP)
            send(ws, STEP)
            expect_close(ws, None)

    threads = [threading.Thread(target=episode) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    wait_until(lambda: server.active_sessions == 0)


@pytest.mark.parametrize("status", [404, 500])
def test_inventory_status(start: Start, status: int) -> None:
    """404: no inventory and no Task API, as openenv-core 0.3.0; other codes: only the list."""
    base = start(faults=[f"inventory-status={status}"]).base_url
    listed = httpx.get(base + "/list_environments")
    assert listed.status_code == status
    assert listed.content == (
        b'{"detail":"Not Found"}' if status == 404 else b'{"detail":"inventory fault"}'
    )
    assert httpx.get(base + "/tiny_env/splits").status_code == (404 if status == 404 else 501)
    for path in ("/health", "/metadata", "/schema", "/openapi.json"):
        assert httpx.get(base + path).status_code == 200, path
