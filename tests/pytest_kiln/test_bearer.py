"""The conformance suite against a server that requires a bearer token (``require-bearer``)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_kiln.cases import CASES, Level
from pytest_kiln.fixtures import OracleFactory
from tests.pytest_kiln.kilnkit import CONFORMANCE, load_report, verdicts

pytest_plugins = ["pytester"]

TOKEN_ENV = "KILN_PLUGIN_TEST_TOKEN"
TOKEN = "kiln-plugin-bearer-5d81e0c7"


def _assert_token_absent(result: pytest.RunResult, report: dict[str, Any], raw: str) -> None:
    assert TOKEN not in result.stdout.str()
    assert TOKEN not in result.stderr.str()
    assert TOKEN not in raw
    assert all(TOKEN not in row["detail"] for row in report["results"])


def test_bearer_server_conforms_with_the_credential(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, openenv_oracle: OracleFactory
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    handle = openenv_oracle("counter", faults=[f"require-bearer={TOKEN_ENV}"])
    path = pytester.path / "bearer.json"
    result = pytester.runpytest_inprocess(
        "-p",
        "kiln",
        "-rA",
        "-vv",
        "--kiln-openenv-url",
        handle.base_url,
        "--kiln-credential-env",
        TOKEN_ENV,
        "--kiln-report",
        str(path),
        *CONFORMANCE,
    )
    assert result.ret == 0, result.stdout.str()
    assert not [line for line in result.outlines if line.startswith("FAILED")]
    result.stdout.fnmatch_lines(["*kiln conformance: * OK, 0 NON-STRICT, 0 FAILED*"])
    report = load_report(path)
    found = verdicts(report)
    assert {case for (_, case) in found} == {case.id for case in CASES}
    assert set(found.values()) <= {"OK", "SKIPPED"}
    assert found[(handle.base_url, "health.status-200")] == "OK"
    assert found[(handle.base_url, "ws.step-observation")] == "OK"
    assert found[(handle.base_url, "ws.ping")] == "OK"  # the raw socket sends the header too
    _assert_token_absent(result, report, path.read_text(encoding="utf-8"))


def test_bearer_server_without_the_credential_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, openenv_oracle: OracleFactory
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    handle = openenv_oracle("counter", faults=[f"require-bearer={TOKEN_ENV}"])
    path = pytester.path / "anonymous.json"
    result = pytester.runpytest_inprocess(
        "-p",
        "kiln",
        "-rA",
        "--kiln-openenv-url",
        handle.base_url,
        "--kiln-report",
        str(path),
        *CONFORMANCE,
    )
    assert result.ret == 1
    report = load_report(path)
    found = {case: verdict for (_, case), verdict in verdicts(report).items()}
    for case_id in (
        "health.status-200",
        "discovery.metadata-shape",
        "discovery.schema-shape",
        "schema.action-valid-json-schema",
    ):
        assert found[case_id] == "FAILED", (case_id, found)
        result.stdout.fnmatch_lines([f"FAILED *test_conformance[[]{handle.base_url}-{case_id}[]]*"])
    for case_id in ("discovery.list-environments", "discovery.openapi", "discovery.identity"):
        assert found[case_id] == "NON-STRICT", (case_id, found)
    assert [row["detail"] for row in report["results"] if row["case"] == "health.status-200"] == [
        "GET /health answered HTTP 401, expected 200"
    ]
    # every MUST case needs the server, so none passes without the credential
    assert {c.id for c in CASES if c.level is Level.MUST} == {
        case for case, verdict in found.items() if verdict == "FAILED"
    }
    _assert_token_absent(result, report, path.read_text(encoding="utf-8"))
