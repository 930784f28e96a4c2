"""The conformance suite's exact verdicts on openenv 0.10.0 servers that behave like real ones.

The peers (`behaviour_peers.py`) are openenv's own `create_app` serving environments that
reproduce what real deployments do: the default single session with a slow factory, uuid
episode ids, an action only a schema-aware builder can satisfy, hidden state the seed does
not reproduce, and an MCP tool environment. Every verdict that is not OK is pinned, so a
change in either direction (a new false alarm, or a problem no longer seen) fails here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("openenv")

from pytest_kiln.cases import CASES, CASES_BY_ID, CaseResult, Verdict, run_case, run_case_async
from tests.interop.behaviour_kit import BEHAVIOURS, rows_by_endpoint, run_suite

pytestmark = pytest.mark.interop

CASE_IDS = frozenset(case.id for case in CASES)
#: What a server without MCP tools cannot be probed for.
NO_MCP_TOOLS = {
    case: "SKIPPED"
    for case in (
        "mcp.tools-list", "mcp.tools-call", "mcp.tools-call-without-name",
        "mcp.tools-call-unknown", "mcp.ws-route", "mcp.step-list-tools", "mcp.step-call-tool",
    )
}
#: peer -> {case: verdict} for every case that is not OK.
NOT_OK: dict[str, dict[str, str]] = {
    "slow-single": NO_MCP_TOOLS,
    "uuid-episodes": NO_MCP_TOOLS,
    "min-items": NO_MCP_TOOLS,
    "hidden-state": {**NO_MCP_TOOLS, "determinism.fresh-session-same-seed": "NON-STRICT"},
    # tools never end an episode, as in openenv's echo_env
    "toolbox": {"post-done.frozen": "SKIPPED"},
}


@pytest.fixture(scope="module")
def report(behaviour_urls: dict[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    """One suite run over every behaviour peer (rows by peer name, then case id)."""
    path = tmp_path_factory.mktemp("behaviours") / "report.json"
    process, data = run_suite([behaviour_urls[name] for name in BEHAVIOURS], path)
    output = process.stdout[-6000:] + process.stderr[-2000:]
    assert process.returncode == 0, output
    assert data["conforming"] is True, output
    by_url = rows_by_endpoint(data)
    return {name: by_url[behaviour_urls[name]] for name in BEHAVIOURS}


@pytest.mark.parametrize("peer", sorted(NOT_OK))
def test_exact_verdicts(report: dict[str, dict[str, dict[str, Any]]], peer: str) -> None:
    rows = report[peer]
    assert set(rows) == CASE_IDS
    found = {case: row["verdict"] for case, row in rows.items() if row["verdict"] != "OK"}
    details = {case: rows[case]["detail"] for case in found}
    assert found == NOT_OK[peer], details


def test_the_single_session_server_is_probed_not_failed(
    report: dict[str, dict[str, dict[str, Any]]],
) -> None:
    rows = report["slow-single"]
    capacity = rows["capacity.capacity-reached"]
    assert capacity["detail"] == "CAPACITY_REACHED at session 2 (1 admitted, max 1)"
    assert capacity["measurements"] == {"admitted_sessions": 1, "capacity_probe": 64,
                                        "max_sessions": 1}
    release = rows["capacity.slot-release"]["measurements"]
    assert release["admitted_sessions"] == 1
    assert 0 <= release["slot_release_ms"] <= 1000


def test_uuid_episode_ids_are_volatile_but_a_named_one_is_kept(
    report: dict[str, dict[str, dict[str, Any]]],
) -> None:
    rows = report["uuid-episodes"]
    assert rows["determinism.fresh-session-same-seed"]["detail"] == (
        "volatile (compared by presence and type): episode_id"
    )
    assert rows["ws.episode-id-echo"]["verdict"] == "OK"


def test_hidden_state_is_named(report: dict[str, dict[str, dict[str, Any]]]) -> None:
    rows = report["hidden-state"]
    assert rows["determinism.reset-same-seed"]["verdict"] == "OK"  # the observation agrees
    detail = rows["determinism.fresh-session-same-seed"]["detail"]
    assert "their states differ at state.secret" in detail
    assert "hidden state the seed does not reproduce" in detail


def test_schema_aware_actions_reach_the_step_cases(
    report: dict[str, dict[str, dict[str, Any]]],
) -> None:
    rows = report["min-items"]
    for case in ("ws.step-observation", "reward.typed", "error.validation-error",
                 "post-done.frozen", "ws.reset-again", "ws.step-before-reset"):
        assert rows[case]["verdict"] == "OK", rows[case]


def test_mcp_tools_are_listed_and_called(report: dict[str, dict[str, dict[str, Any]]]) -> None:
    rows = report["toolbox"]
    assert rows["mcp.tools-list"]["detail"] == "3 tools: echo_message, add, remember"
    assert rows["mcp.tools-call"]["detail"] == "called echo_message with ['message']"
    assert rows["mcp.step-list-tools"]["detail"] == "3 tools"
    assert rows["mcp.tools-call-unknown"]["detail"] == "JSON-RPC error -32603"


def test_a_slot_held_by_an_abandoned_socket_is_waited_for(behaviour_urls: dict[str, str]) -> None:
    """A socket closed while its environment is still being built keeps openenv's only
    slot until the factory returns; the next MUST case waits for it instead of failing."""
    from websockets.asyncio.client import connect

    url = behaviour_urls["slow-single"]
    case = CASES_BY_ID["error.invalid-json"]
    assert run_case(case, url).verdict is Verdict.OK  # warm: imports, a first session

    async def abandon_then_run() -> CaseResult:
        async with connect(url.replace("http://", "ws://") + "/ws", proxy=None):
            pass  # closed at once: the server is still inside the 0.4 s factory
        return await run_case_async(case, url)

    result = asyncio.run(abandon_then_run())
    assert result.verdict is Verdict.OK, result
    assert result.measurements.get("capacity_retries", 0) >= 1, result


def test_a_small_probe_does_not_reach_a_larger_limit(behaviour_urls: dict[str, str]) -> None:
    result = run_case(CASES_BY_ID["capacity.capacity-reached"], behaviour_urls["min-items"],
                      capacity_probe=3)
    assert result.verdict is Verdict.SKIPPED
    assert result.detail == (
        "4 concurrent sessions were admitted (--kiln-capacity-probe 3): the limit is above "
        "the probe; capacity not provokable"
    )
    assert result.measurements["admitted_sessions"] == 4
