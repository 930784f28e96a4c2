"""The production route's tool (qualification/tools/http_roundtrip.py) fails closed.

Its passing path is the committed hf-trl-roundtrip receipt (steps ``http-*``); here only
what a receipt cannot show: a server that never starts fails the step with the reason and
no metric, and the import half refuses to run without the identity the export half wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.qualification.fixture import REPO

TOOL = REPO / "qualification" / "tools" / "http_roundtrip.py"
KILN_VERIFY = str(Path(sys.executable).with_name("kiln-verify"))


def _run(tmp_path: Path, half: str, *extra: str) -> subprocess.CompletedProcess[str]:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)  # no config.json: serve refuses it with a usage error
    sft = tmp_path / "sft.jsonl"
    sft.write_text(json.dumps({"messages": []}) + "\n")
    argv = [
        sys.executable, str(TOOL), half, "--kiln-verify", KILN_VERIFY, "--model", str(model),
        "--device", "cpu", "--state-dir", str(tmp_path / "state"), "--out-dir",
        str(tmp_path / "out"), "--sft", str(sft), *extra,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


def test_a_server_that_cannot_start_fails_the_export_half(tmp_path: Path) -> None:
    done = _run(tmp_path, "export", "--grpo", str(tmp_path / "sft.jsonl"))
    assert done.returncode == 1, done.stderr
    assert "qualification tool: serve exited 2 during start-up" in done.stderr
    assert "KILN_QUALIFICATION_METRIC" not in done.stdout
    assert not (tmp_path / "out" / "resident-identity.json").exists()


def test_the_import_half_needs_the_recorded_identity(tmp_path: Path) -> None:
    done = _run(tmp_path, "import")
    assert done.returncode == 1, done.stderr
    assert "resident-identity.json: the export half records it" in done.stderr
    assert not (tmp_path / "state").exists()  # no server was started
    assert "KILN_QUALIFICATION_METRIC" not in done.stdout
