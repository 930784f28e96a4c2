"""The conformance report's `collectable` verdict and `rollout` agree, endpoint by endpoint.

Four oracle servers over real sockets: a well-behaved one and the three fault profiles a
real deployment shows (`ignore-seed` on maze, where the seed draws the maze;
`unseeded-hidden-state`; `ignore-episode-id`). The suite runs in full through pytester, so
the first three are *conforming* (their failing cases are SHOULD and MAY), and the report
must still say which of them kiln-verify can collect from, naming the cases behind the
answer in the JSON, the HTML and the terminal. Then `openenv rollout` runs against each:
it collects exactly where the verdict says so, and every refusal names a case the verdict
listed as not OK.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.report import engine
from pytest_kiln.fixtures import OracleFactory
from pytest_kiln.report import REPORT_FORMAT
from tests.pytest_kiln.kilnkit import CONFORMANCE, load_report
from tests.report.pages import elements

pytest_plugins = ["pytester"]

FRESH = "determinism.fresh-session-same-seed"
ECHO = "ws.episode-id-echo"
REPRODUCED = "reset(seed) reproduced the observation and the hidden state on two fresh sessions"
REFUSED = (
    f"two fresh sessions reset with one seed disagreed ({FRESH}; its detail says where): rollout "
    "refuses every group with reset_nondeterministic; where only the hidden state differs, or "
    "cannot be read right after reset, --no-state-check collects anyway, knowing that a "
    "group's candidates may then play different hidden games"
)


def _rollout(url: str, directory: Path, *flags: str) -> tuple[int, Any]:
    directory.mkdir()
    args = ["openenv", "rollout", "--environment", url, "--json", "--groups", "2",
            "--group-size", "2", "--max-steps", "2",
            "--output", str(directory / "d.jsonl"), "--replay-output", str(directory / "r.json"),
            "--summary-output", str(directory / "s.json"), *flags]  # fmt: skip
    result = CliRunner().invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def test_the_verdict_names_its_cases_and_rollout_agrees(
    pytester: pytest.Pytester, openenv_oracle: OracleFactory, tmp_path: Path
) -> None:
    servers = {
        "plain": openenv_oracle("maze"),
        "seed": openenv_oracle("maze", faults=["ignore-seed"]),
        "hidden": openenv_oracle("bandit", faults=["unseeded-hidden-state"]),
        "episode": openenv_oracle("bandit", faults=["ignore-episode-id"]),
    }
    url = {name: handle.base_url for name, handle in servers.items()}
    report, page = pytester.path / "report.json", pytester.path / "report.html"
    args = [arg for handle in servers.values() for arg in ("--kiln-openenv-url", handle.base_url)]
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-report", str(report), "--kiln-report-html", str(page),
        *args, *CONFORMANCE,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()  # no MUST case failed anywhere
    data = load_report(report)
    assert data["format"] == REPORT_FORMAT == "kiln-verify.conformance-report.v2"
    assert data["conforming"] is True
    entries = {entry["endpoint"]: entry for entry in data["collectable"]}
    assert list(entries) == sorted(url.values())
    expected = {
        "plain": (True, "kept", {FRESH: "OK", ECHO: "OK"},
                  f"{REPRODUCED}; a requested episode_id is kept"),
        "seed": (False, "kept", {FRESH: "NON-STRICT", ECHO: "OK"}, REFUSED),
        "hidden": (False, "kept", {FRESH: "NON-STRICT", ECHO: "OK"}, REFUSED),
        "episode": (True, "ignored", {FRESH: "OK", ECHO: "INFORMATIONAL"}, (
            f"{REPRODUCED}; a requested episode_id is not kept, so leave episode_id out of the "
            "reset options (--reset-options): an id the reset does not name is session "
            "identity, compared by presence and JSON type only, and one it names but the "
            "server does not keep is refused (episode_id_ignored)"
        )),
    }  # fmt: skip
    for name, (collectable, episode_id, cases, reason) in expected.items():
        entry = entries[url[name]]
        assert entry == {
            "endpoint": url[name],
            "collectable": collectable,
            "requested_episode_id": episode_id,
            "cases": [{"case": case, "verdict": verdict} for case, verdict in cases.items()],
            "reason": reason,
        }, name
    # the terminal: a column in the endpoint table, then one line per endpoint with its cases
    row = re.escape(url["seed"]) + r"\s+\d+\s+\d+\s+0\s+\d+\s+\d+\s+yes\s+no$"
    assert any(re.match(row, line) for line in result.outlines), result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"collectable   {url['hidden']}: no ({FRESH} NON-STRICT, {ECHO} OK): {REFUSED}"],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(
        [f"collectable   {url['plain']}: yes ({FRESH} OK, {ECHO} OK): {REPRODUCED}; *"]
    )
    # the HTML: the verdict, its cases (a failing one linked to its finding) and why
    html = page.read_bytes()
    assert engine.conformance_report(report).data == html
    text = " ".join(elements(html.decode()).text)
    assert "Collectable per endpoint" in text
    assert REFUSED in text
    assert re.search(r'<a href="#finding-\d+">NON-STRICT</a>', html.decode())

    # rollout collects exactly where the verdict says so; each refusal names a failing case
    code, document = _rollout(url["plain"], tmp_path / "plain")
    assert code == 0, document
    for name in ("seed", "hidden"):
        code, document = _rollout(url[name], tmp_path / name)
        assert (code, document["error"]["code"]) == (1, "reset_nondeterministic"), name
        assert f"(conformance case {FRESH})" in document["error"]["rule"]
        assert entries[url[name]]["collectable"] is False
    code, document = _rollout(url["episode"], tmp_path / "episode")
    assert code == 0, document  # each session's own id is volatile identity
    options = tmp_path / "reset.json"
    options.write_text('{"episode_id": "run-7"}', encoding="utf-8")
    code, document = _rollout(url["episode"], tmp_path / "named", "--reset-options", str(options))
    assert (code, document["error"]["code"]) == (1, "episode_id_ignored")
    assert f"(conformance case {ECHO})" in document["error"]["rule"]
    assert {item["case"]: item["verdict"] for item in entries[url["episode"]]["cases"]}[ECHO] == (
        "INFORMATIONAL"
    )
    for name in ("seed", "hidden", "named"):
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == []  # nothing partial
