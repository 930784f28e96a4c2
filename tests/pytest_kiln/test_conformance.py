"""The conformance suite end to end: oracle inventory, fault profiles, the report file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kiln.cases import CASES, CASES_BY_ID, Level, Verdict, run_case
from pytest_kiln.fixtures import OracleFactory
from pytest_kiln.report import REPORT_FORMAT
from tests.pytest_kiln.kilnkit import CONFORMANCE, load_report, verdicts

pytest_plugins = ["pytester"]

CASE_IDS = {case.id for case in CASES}


def test_inventory_ids_are_stable_and_well_formed() -> None:
    assert len(CASE_IDS) == len(CASES)
    for case in CASES:
        assert case.id.count(".") == 1
        assert case.id == case.id.lower()
        assert case.clause.startswith("docs/openenv-protocol.md §")
        assert "should" not in case.requirement.lower()
    for required in (
        "health.status-200",
        "ws.step-observation",
        "error.session-error-non-object",
        "capacity.capacity-reached",
        "determinism.reset-same-seed",
        "ws.ping",
        "task-api.catalog-or-501",
        "post-done.frozen",
    ):
        assert required in CASE_IDS
    assert CASES_BY_ID["determinism.reset-same-seed"].level is Level.SHOULD
    assert len(CASES) >= 35


#: The first inventory's ids with their levels and clauses: an id is never renamed,
#: re-levelled or pointed at another clause.
FIRST_INVENTORY: dict[str, tuple[str, str]] = {
    "health.status-200": ("MUST", "§1"),
    "discovery.metadata-shape": ("MUST", "§3"),
    "discovery.schema-shape": ("MUST", "§3"),
    "discovery.list-environments": ("SHOULD", "§3"),
    "discovery.openapi": ("SHOULD", "§1"),
    "discovery.identity": ("SHOULD", "§8"),
    "schema.action-valid-json-schema": ("MUST", "§3"),
    "ws.reset-observation": ("MUST", "§2.3"),
    "ws.step-observation": ("MUST", "§2.3"),
    "ws.state": ("MUST", "§2.2"),
    "ws.close-no-reply": ("MUST", "§2.1"),
    "ws.ping": ("MUST", "§2.5"),
    "error.invalid-json": ("MUST", "§2.4"),
    "error.unknown-type": ("MUST", "§2.4"),
    "error.validation-error": ("MUST", "§2.4"),
    "error.session-error-non-object": ("MUST", "§2.4"),
    "capacity.capacity-reached": ("MUST", "§2.4"),
    "reward.typed": ("MUST", "§5"),
    "determinism.reset-same-seed": ("SHOULD", "§6"),
    "post-done.frozen": ("SHOULD", "§5"),
    "task-api.catalog-or-501": ("MUST", "§4"),
}


def test_first_inventory_ids_keep_their_level_and_clause() -> None:
    for case_id, (level, section) in FIRST_INVENTORY.items():
        case = CASES_BY_ID[case_id]
        assert case.level.value == level, case_id
        assert case.clause.endswith(section), case_id


def test_the_docs_table_is_the_inventory() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    levels = (" | MUST | ", " | SHOULD | ", " | MAY | ")
    rows = [line for line in text.splitlines()
            if line.startswith("| `") and any(level in line for level in levels)]
    expected = [f"| `{c.id}` | {c.level.value} | {c.clause} | {c.requirement} |" for c in CASES]
    assert rows == expected


def test_must_cases_pass_on_several_oracles(pytester: pytest.Pytester) -> None:
    report = pytester.path / "report.json"
    result = pytester.runpytest_inprocess(
        "-p",
        "kiln",
        "--kiln-oracle",
        "counter,bandit,algebra,dyna",
        "--kiln-report",
        str(report),
        *CONFORMANCE,
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*kiln conformance: * OK, 0 NON-STRICT, 0 FAILED*"])
    data = load_report(report)
    assert data["format"] == REPORT_FORMAT
    assert data["conforming"] is True
    assert [e["id"] for e in data["endpoints"]] == [
        "oracle-algebra",
        "oracle-bandit",
        "oracle-counter",
        "oracle-dyna",
    ]
    found = verdicts(data)
    assert len(found) == 4 * len(CASES)
    for endpoint in ("oracle-counter", "oracle-bandit", "oracle-algebra", "oracle-dyna"):
        assert {case for (ep, case) in found if ep == endpoint} == CASE_IDS
        assert found[(endpoint, "ws.step-observation")] == "OK"
    assert set(found.values()) <= {"OK", "SKIPPED"}
    assert data["summary"]["FAILED"] == 0
    assert sum(data["summary"].values()) == 4 * len(CASES)
    assert data["summary_line"].startswith("kiln conformance: ")


def test_full_inventory_has_no_failed_must(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "kiln", "--kiln-oracle", "all", *CONFORMANCE)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*0 NON-STRICT, 0 FAILED*"])


def test_fault_profiles_fail_the_right_cases(
    pytester: pytest.Pytester, openenv_oracle: OracleFactory
) -> None:
    binary = openenv_oracle("bandit", faults=["binary-frame"])
    wrong = openenv_oracle("counter", faults=["wrong-response-type"])
    nondet = openenv_oracle("bandit", faults=["nondeterministic-reset"])
    report = pytester.path / "faults.json"
    result = pytester.runpytest_inprocess(
        "-p",
        "kiln",
        "-rf",
        "--kiln-report",
        str(report),
        "--kiln-openenv-url",
        binary.base_url,
        "--kiln-openenv-url",
        wrong.base_url,
        "--kiln-openenv-url",
        nondet.base_url,
        *CONFORMANCE,
    )
    assert result.ret == 1
    found = verdicts(load_report(report))
    for handle in (binary, wrong):
        failed = {c for (ep, c), v in found.items() if ep == handle.base_url and v == "FAILED"}
        assert failed == {"ws.step-observation", "reward.typed"}, (handle, failed)
        result.stdout.fnmatch_lines(
            [f"FAILED *test_conformance[[]{handle.base_url}-ws.step-observation[]]*"]
        )
    assert found[(nondet.base_url, "determinism.reset-same-seed")] == "NON-STRICT"
    assert not [v for (ep, _), v in found.items() if ep == nondet.base_url and v == "FAILED"]
    # the NON-STRICT case is still a passing pytest test
    assert f"{nondet.base_url}-determinism" not in "".join(
        line for line in result.outlines if line.startswith("FAILED")
    )
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 4
    result.stdout.fnmatch_lines(["*kiln conformance: * OK, * NON-STRICT, 4 FAILED*"])


def test_capacity_case_against_a_one_session_server(openenv_oracle: OracleFactory) -> None:
    handle = openenv_oracle("counter", max_sessions=1)
    result = run_case(CASES_BY_ID["capacity.capacity-reached"], handle.base_url)
    assert result.verdict is Verdict.OK, result
    assert "max 1" in result.detail


def test_unreachable_endpoint_fails_must_cases(pytester: pytest.Pytester) -> None:
    report = pytester.path / "down.json"
    result = pytester.runpytest_inprocess(
        "-p",
        "kiln",
        "--kiln-openenv-url",
        "http://127.0.0.1:9",
        "--kiln-report",
        str(report),
        "-k",
        "health or discovery.openapi",
        *CONFORMANCE,
    )
    assert result.ret == 1
    found = verdicts(load_report(report))
    assert found[("http://127.0.0.1:9", "health.status-200")] == "FAILED"
    assert found[("http://127.0.0.1:9", "discovery.openapi")] == "NON-STRICT"


def test_report_section_is_attached(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-oracle", "counter", "-rA", "-k", "health", *CONFORMANCE
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*kiln*", "health.status-200 [[]MUST, *[]] on oracle-counter: OK"])


def test_report_path_that_exists_is_a_usage_error(pytester: pytest.Pytester) -> None:
    existing: Path = pytester.path / "exists.json"
    existing.write_text("{}", encoding="utf-8")
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-oracle", "counter", "--kiln-report", str(existing), *CONFORMANCE
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kiln-report*already exists*remove it or choose a new path*"])
    assert existing.read_text(encoding="utf-8") == "{}"
