"""A peer that echoes the bearer token JSON-escaped, in every position, is refused.

Real loopback servers (the oracle behind :class:`tests.openenv.protocol.hostile_peer.HostileApp`),
real front ends (``kiln-verify openenv rollout``, ``inspect --json``, ``tasks --json`` run
in process), hypothesis choosing the token, its spelling (at least one character escaped,
so the raw bytes never hold it) and the position (any container at any depth of the
answer: a new value, a new key, or an existing string replaced). Every case must end with
exit 1 and exactly ``credential_reflected``, no file in the output directory, and no
spelling of the token in stdout, stderr or any log record.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from kiln_verify.cli import app
from kiln_verify.errors import KilnError
from kiln_verify.openenv.protocol.client import OpenEnvClient
from tests.openenv.protocol.hostile_peer import (
    HTTP_TARGETS,
    HostileServer,
    decodes_to_token,
    every_log_record,
    hostile_server,
    inject,
    injections,
    keepable,
    secret_tokens,
)

VARIABLE = "KILN_HOSTILE_TOKEN"
EXAMPLES = 20
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
tokens = secret_tokens(Path(__file__).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def counter() -> Iterator[HostileServer]:
    with hostile_server("counter") as server:
        yield server


@pytest.fixture(scope="module")
def measure() -> Iterator[HostileServer]:
    with hostile_server("measure") as server:
        yield server


def _refused(server: HostileServer, target: str, args: list[str], out: Path, data: st.DataObject
             ) -> Result:  # fmt: skip
    token = data.draw(tokens, label="token")
    injection = data.draw(injections(token), label="injection")
    with every_log_record() as logs, server.serving(target, injection) as hostile:
        result = CliRunner().invoke(app, [*args, "--json"], env={VARIABLE: token})
    assert hostile.rewritten >= 1, "the hostile answer was never asked for"
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"]["code"] == "credential_reflected"
    assert sorted(out.iterdir()) == []
    for text in (result.stdout, result.stderr, *logs):
        assert not decodes_to_token(token, text)
    return result


ROLLOUT_TARGETS = (*HTTP_TARGETS.values(), "reset", "step", "state", "error")


def test_a_token_that_is_a_piece_of_fixed_wording_is_not_drawn() -> None:
    """A key inside an error code or this module's variable name would be "found" in a
    refusal that never echoed it: such tokens are no test of reflection."""
    source = Path(__file__).read_text(encoding="utf-8")
    assert not keepable("credential_r")  # of the error code credential_reflected
    assert not keepable("HOSTILE_TOKEN", source)  # of this module's variable
    assert keepable("Zq9" + "-not-a-word" * 2, source)  # written nowhere whole


@pytest.mark.parametrize("target", ROLLOUT_TARGETS)
@SETTINGS
@given(data=st.data())
def test_rollout_refuses_an_escaped_token(
    target: str, counter: HostileServer, tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:  # fmt: skip
    out = tmp_path_factory.mktemp("rollout")
    args = ["openenv", "rollout", "--environment", counter.base_url, "--credential-env", VARIABLE,
            "--groups", "1", "--group-size", "2", "--max-steps", "2", "--no-thinking",
            "--output", str(out / "openenv.rollouts.jsonl"),
            "--replay-output", str(out / "openenv.replay.json"),
            "--summary-output", str(out / "openenv.rollout-summary.json")]  # fmt: skip
    _refused(counter, target, args, out, data)


@pytest.mark.parametrize("target", sorted(HTTP_TARGETS.values()))
@SETTINGS
@given(data=st.data())
def test_inspect_refuses_an_escaped_token(
    target: str, counter: HostileServer, tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:  # fmt: skip
    out = tmp_path_factory.mktemp("inspect")
    args = ["openenv", "inspect", "--environment", counter.base_url, "--credential-env", VARIABLE]
    _refused(counter, target, args, out, data)


@pytest.mark.parametrize("target", ["list_environments", "splits", "num_tasks", "task_range"])
@SETTINGS
@given(data=st.data())
def test_tasks_refuses_an_escaped_token(
    target: str, measure: HostileServer, tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:  # fmt: skip
    out = tmp_path_factory.mktemp("tasks")
    args = ["openenv", "tasks", "--environment", measure.base_url, "--credential-env", VARIABLE,
            "--split", "train", "--limit", "3"]  # fmt: skip
    _refused(measure, target, args, out, data)


def test_the_hostile_peer_is_harmless_without_an_injection(
    counter: HostileServer, tmp_path: Path
) -> None:
    """The same command against the same server, unchanged, succeeds (the control)."""
    args = ["openenv", "rollout", "--environment", counter.base_url, "--credential-env", VARIABLE,
            "--groups", "1", "--group-size", "2", "--max-steps", "2", "--no-thinking", "--json",
            "--output", str(tmp_path / "d.jsonl"), "--replay-output", str(tmp_path / "r.json"),
            "--summary-output", str(tmp_path / "s.json")]  # fmt: skip
    result = CliRunner().invoke(app, args, env={VARIABLE: "kiln-hostile-control-token"})
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "r.json", "s.json"]


async def _unsolicited_refusal(frame: str, token: str) -> KilnError:
    """A server that sends ``frame`` right after the upgrade (as OpenEnv sends
    CAPACITY_REACHED); what the client's first request raises."""

    def health(connection: ServerConnection, request: Request) -> Response | None:
        return connection.respond(200, "{}") if request.path == "/health" else None

    async def handler(connection: ServerConnection) -> None:
        await connection.send(frame)
        await connection.wait_closed()

    async with serve(handler, "127.0.0.1", 0, process_request=health) as server:
        port = server.sockets[0].getsockname()[1]
        environ = {VARIABLE: token}
        async with OpenEnvClient(f"http://127.0.0.1:{port}", credential_env=VARIABLE,
                                 environ=environ) as client:  # fmt: skip
            session = await client.open_session()
            await asyncio.sleep(0.05)  # the frame is queued before the request
            try:
                await session.state()
            except KilnError as exc:
                return exc
            finally:
                await session.close()
    raise AssertionError("the unsolicited frame was accepted")


@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data())
def test_an_unsolicited_frame_is_refused_as_a_raw_reflection_is(data: st.DataObject) -> None:
    """Before the first request a terminal error frame is the server's refusal; one that
    carries the token, in any spelling, poisons the session with the same cause."""
    token = data.draw(tokens, label="token")

    def frame(message: str) -> dict[str, object]:
        return {"type": "error", "data": {"code": "CAPACITY_REACHED", "message": message}}

    escaped = inject(frame("full"), data.draw(injections(token), label="injection"))
    raw = json.dumps(frame(token))
    for text in (raw, escaped):
        refusal = asyncio.run(_unsolicited_refusal(text, token))
        assert refusal.code == "session_poisoned"
        assert "credential_reflected" in refusal.rule
        assert not decodes_to_token(token, json.dumps(refusal.to_dict(), ensure_ascii=False))
