"""Session slots in the suite: the capacity probe option, slot release, and retries."""

from __future__ import annotations

import pytest

from pytest_kiln.cases import CASES, CASES_BY_ID, Level, Verdict, run_case
from pytest_kiln.fixtures import OracleFactory
from tests.pytest_kiln.kilnkit import CONFORMANCE, load_report

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("value", ["0", "abc", "1025"])
def test_a_bad_probe_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-oracle", "counter", f"--kiln-capacity-probe={value}", *CONFORMANCE
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--kiln-capacity-probe '{value}': give a whole number of sessions from 1 to 1024*"]
    )


def test_the_probe_bounds_the_sessions_opened(pytester: pytest.Pytester) -> None:
    report = pytester.path / "probe.json"
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-oracle", "counter", "--kiln-capacity-probe", "2",
        "--kiln-report", str(report), "-k", "capacity", *CONFORMANCE,
    )
    assert result.ret == 0, result.stdout.str()
    rows = {row["case"]: row for row in load_report(report)["results"]}
    assert set(rows) == {"capacity.capacity-reached", "capacity.slot-release"}
    for row in rows.values():
        assert row["verdict"] == "SKIPPED"
        assert row["detail"] == (
            "3 concurrent sessions were admitted (--kiln-capacity-probe 2): the limit is "
            "above the probe; capacity not provokable"
        )
        assert row["measurements"] == {"admitted_sessions": 3, "capacity_probe": 2}


def test_the_probe_from_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkiln_capacity_probe = 1\n")
    report = pytester.path / "ini.json"
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-oracle", "counter", "--kiln-report", str(report),
        "-k", "capacity-reached", *CONFORMANCE,
    )
    assert result.ret == 0, result.stdout.str()
    (row,) = load_report(report)["results"]
    assert row["measurements"]["capacity_probe"] == 1


def test_default_probe_reaches_the_oracle_default(openenv_oracle: OracleFactory) -> None:
    handle = openenv_oracle("counter")  # 64 sessions, the oracle's default
    result = run_case(CASES_BY_ID["capacity.capacity-reached"], handle.base_url)
    assert result.verdict is Verdict.OK, result
    assert result.detail == "CAPACITY_REACHED at session 65 (64 admitted, max 64)"
    assert result.measurements == {"admitted_sessions": 64, "capacity_probe": 64,
                                   "max_sessions": 64}


def test_slot_release_is_measured_on_a_one_session_server(openenv_oracle: OracleFactory) -> None:
    handle = openenv_oracle("bandit", max_sessions=1)
    case = CASES_BY_ID["capacity.slot-release"]
    assert case.level is Level.SHOULD
    result = run_case(case, handle.base_url)
    assert result.verdict is Verdict.OK, result
    assert result.detail.startswith("slot free again ")
    assert result.measurements["admitted_sessions"] == 1
    assert 0 <= result.measurements["slot_release_ms"] <= 1000
    assert handle.active_sessions == 0


def test_a_slot_still_held_is_waited_for_not_failed(openenv_oracle: OracleFactory) -> None:
    """A step in flight holds the only slot after its client left (delay-step); the next
    case waits for the server to give it back instead of failing on CAPACITY_REACHED."""
    import asyncio

    from websockets.asyncio.client import connect

    handle = openenv_oracle("counter", faults=["delay-step=0.8"], max_sessions=1)

    async def leave_mid_step() -> None:
        async with connect(handle.ws_url, proxy=None) as ws:
            await ws.send('{"type":"reset"}')
            await ws.recv()
            await ws.send('{"type":"step","data":{"amount":1}}')

    asyncio.run(leave_mid_step())
    for case_id in ("error.invalid-json", "ws.reset-observation"):
        result = run_case(CASES_BY_ID[case_id], handle.base_url)
        assert result.verdict is Verdict.OK, result
        if case_id == "error.invalid-json":
            assert result.measurements["capacity_retries"] >= 1, result


def test_spurious_capacity_refusals_fail_no_must_case(pytester: pytest.Pytester,
                                                      openenv_oracle: OracleFactory) -> None:
    flaky = openenv_oracle("bandit", faults=["flaky-capacity=2"])  # every second session is refused
    report = pytester.path / "flaky.json"
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-openenv-url", flaky.base_url, "--kiln-report", str(report),
        "-k", "not capacity", *CONFORMANCE,
    )
    assert result.ret == 0, result.stdout.str()
    rows = load_report(report)["results"]
    assert {row["verdict"] for row in rows} <= {"OK", "SKIPPED"}
    retried = [row["case"] for row in rows if row.get("measurements", {}).get("capacity_retries")]
    assert len(retried) >= 5, retried
    assert len(rows) == len(CASES) - 2
