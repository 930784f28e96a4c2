"""The whole HF/TRL loop over HTTP against one ``serve --model`` server (issue 28 item 4).

``hf export-sft --url`` takes the server's export home verified; the downloaded bundle's
own ``train.py`` trains it (on the session's tiny model, once); ``hf import-peft --url``
puts the result back into the same server; a rollout run on that server plays the
imported adapter against the oracle ``bandit``, its summary's behaviour policy names the
adapter and the content revision the import answered, and the run's downloaded bundle
verifies offline. Every step is the command line or plain HTTP, as a user would do it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.core.safe_tar import extract_tar_gz
from kiln_verify.server.runner import ServerHandle
from oracle.runner import ServerHandle as OracleHandle
from tests import models
from tests.control.support import client_of, resident_config, running, small_request, wait_terminal
from tests.hf.export.conftest import ROWS
from tests.hf.importer.conftest import train

EXPORT = "loop_01"
ADAPTER = "loop-v1"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: Path) -> Iterator[ServerHandle]:
    state = tmp_path_factory.mktemp("hf-loop") / "state"
    with running(resident_config(state, model)) as handle:
        yield handle


def cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_export_train_import_and_play_over_http(
    server: ServerHandle, model: Path, bandit: OracleHandle, tmp_path: Path
) -> None:
    url = server.base_url
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in ROWS))

    # 1. the server's export, downloaded, verified, published; the server copy deleted
    archive = tmp_path / f"{EXPORT}.kiln-hf.tar.gz"
    exported = cli("hf", "export-sft", "--url", url, "--name", EXPORT, "--file", str(rows),
                   "--output", str(archive))  # fmt: skip
    assert (exported["status"], exported["server_copy"]) == ("exported", "deleted")
    assert cli("hf", "list", "--url", url) == {"data": []}

    # 2. the bundle's own train.py on the same base model
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    bundle = extract_tar_gz(archive, unpacked, expected_root=f"{EXPORT}.kiln-hf")
    train(bundle, model)

    # 3. the result back into the same server, exactly as the client predicted
    imported = cli("hf", "import-peft", "--bundle", str(bundle), "--name", ADAPTER, "--url", url)
    assert imported["status"] == "imported"
    assert imported["export_sha256"] == exported["export_sha256"]
    with client_of(server) as http:
        listed = http.get("/v1/adapters").json()
        assert [(a["name"], a["status"]) for a in listed["available"]] == [(ADAPTER, "available")]

        # 4. a run on the same server plays the imported adapter
        body = small_request(bandit.base_url, adapter=ADAPTER, max_steps=1, max_action_tokens=4)
        created = http.post("/v1/openenv/runs", json=body)
        assert created.status_code == 202, created.text
        status = wait_terminal(http, created.json()["run_id"], timeout=120)
        assert status["state"] == "rollout_ready", status.get("failure")
        run_id = status["run_id"]
        (summary_url,) = [a["url"] for a in status["artifacts"] if a["kind"] == "summary"]
        policy = http.get(summary_url).json()["behavior_policy"]
    assert policy["implementation"] == "kiln-verify/transformers"
    assert policy["adapter"] == {
        "name": ADAPTER,
        "content_sha256": "sha256:" + imported["content_revision"],
    }

    # 5. the run's bundle, downloaded and verified offline
    target = tmp_path / "run"
    cli("openenv", "artifact", run_id, "--all", "--output-dir", str(target), "--url", url)
    summary = target / ARTIFACT_PATHS["summary"]
    report = cli("openenv", "verify", "--summary", str(summary))
    assert report["schema"] == "kiln.openenv-verification.v1"
    assert (report["groups"], report["rollouts"]) == (1, 2)
    assert json.loads(summary.read_bytes())["behavior_policy"] == policy
