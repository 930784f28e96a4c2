"""`kiln-verify openenv report`: one input kind, no clobbering, typed failures, exit codes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.report import engine
from kiln_verify.testing.bundles import FixtureBundle


def _report(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["openenv", "report", *args])
    return result.exit_code, result.stdout


def test_bundle_report_written_once_then_refused_then_forced(
    bundle: FixtureBundle, tmp_path: Path
) -> None:
    output = tmp_path / "report.html"
    code, out = _report("--summary", str(bundle.summary), "--output", str(output), "--json")
    assert code == 0, out
    receipt = json.loads(out)
    data = output.read_bytes()
    assert receipt == {
        "kind": "bundle",
        "format": "html",
        "output": str(output),
        "bytes": len(data),
        "sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
    }
    assert data == engine.bundle_report(bundle.summary).data
    code, out = _report("--summary", str(bundle.summary), "--output", str(output), "--json")
    assert code == 1
    assert json.loads(out)["error"]["code"] == "target_exists"
    output.write_bytes(b"old")
    code, _ = _report("--summary", str(bundle.summary), "-o", str(output), "--force")
    assert code == 0
    assert output.read_bytes() == data


def test_markdown_report(bundle: FixtureBundle, tmp_path: Path) -> None:
    output = tmp_path / "report.md"
    code, out = _report("--summary", str(bundle.summary), "-o", str(output), "--markdown")
    assert code == 0
    assert out.startswith("bundle report written to ")
    assert output.read_bytes().startswith(b"# Rollout bundle report\n")


def test_a_refused_bundle_leaves_no_report(bundle: FixtureBundle, tmp_path: Path) -> None:
    bundle.replay.write_bytes(bundle.replay.read_bytes().replace(b'"max_steps"', b'"max_stepz"', 1))
    output = tmp_path / "report.html"
    code, out = _report("--summary", str(bundle.summary), "-o", str(output), "--json")
    assert code == 1
    assert json.loads(out)["error"]["code"].startswith("bundle_")
    assert not output.exists()


def test_usage_errors_exit_2(bundle: FixtureBundle, conformance_file: Path, tmp_path: Path) -> None:
    output = str(tmp_path / "r.html")
    two = _report(
        "--summary", str(bundle.summary), "--conformance", str(conformance_file), "-o", output
    )
    assert two[0] == 2
    stray = _report("--conformance", str(conformance_file), "--dataset", "x", "-o", output)
    assert stray[0] == 2
    sides = _report("--summary", str(bundle.summary), "--baseline-summary", "x", "-o", output)
    assert sides[0] == 2
    missing_output = _report("--summary", str(bundle.summary))
    assert missing_output[0] == 2
    assert not Path(output).exists()


def test_conformance_and_evaluation_reports(
    conformance_file: Path, evaluation: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    code, out = _report(
        "--conformance", str(conformance_file), "-o", str(tmp_path / "c.html"), "--json"
    )
    assert code == 0, out
    assert json.loads(out)["kind"] == "conformance"
    receipt, _, _ = evaluation
    # the sides default to baseline/ and candidate/ beside the receipt (openenv evaluate's layout)
    code, out = _report("--receipt", str(receipt), "-o", str(tmp_path / "e.html"), "--json")
    assert code == 0, out
    assert json.loads(out)["kind"] == "evaluation"
