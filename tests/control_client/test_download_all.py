"""`openenv artifact RUN_ID --all --output-dir DIR` against a real control plane (a socket),
then `verify-run` on what it wrote; a file tampered in the server's run directory between
the run and the download is refused with the server's integrity code and nothing appears."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.layout import ARTIFACT_PATHS, RUN_STATUS_FILE
from kiln_verify.control_client.client import ControlClient
from kiln_verify.control_client.download_run import download_run
from kiln_verify.errors import ControlHttpStatus, KilnError
from kiln_verify.openenv.runcheck.engine import verify_run
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import control_server, run_to_end, small_request, wait_terminal

BUNDLE = ("dataset", "replay", "summary")


@dataclass(frozen=True)
class Published:
    url: str
    run_id: str
    run_dir: Path
    status_bytes: bytes


@pytest.fixture(scope="module")
def published(
    bandit: OracleHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Published]:
    state = tmp_path_factory.mktemp("download-all") / "state"
    with (
        control_server(state) as server,
        httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
    ):
        status = run_to_end(http, small_request(bandit.base_url, groups=2))
        assert status["state"] == "rollout_ready", status
        run_id = str(status["run_id"])
        served = http.get(f"/v1/openenv/runs/{run_id}").content
        run_dir = state / ".openenv" / "runs" / run_id
        yield Published(server.base_url, run_id, run_dir, served)


def _entries(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def test_the_whole_run_lands_in_its_layout_and_verifies(
    published: Published, tmp_path: Path
) -> None:
    target = tmp_path / "run"
    with ControlClient(published.url) as client:
        receipt = download_run(client, published.run_id, str(target))
    assert [f.kind for f in receipt.files] == list(BUNDLE)
    assert _entries(target) == sorted([RUN_STATUS_FILE, *(ARTIFACT_PATHS[k] for k in BUNDLE)])
    assert (target / RUN_STATUS_FILE).read_bytes() == published.status_bytes
    for kind in BUNDLE:
        assert (target / ARTIFACT_PATHS[kind]).read_bytes() == (
            published.run_dir / ARTIFACT_PATHS[kind]
        ).read_bytes()
    assert published.url not in json.dumps(receipt.to_json())
    report = verify_run(target)
    assert (report.run_id, report.run_kind) == (published.run_id, "rollout")
    assert report.links == ["run bundle", "run status manifest", "training contract"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no staging left beside it


def test_an_existing_directory_needs_force(published: Published, tmp_path: Path) -> None:
    target = tmp_path / "run"
    target.mkdir()
    (target / "notes.txt").write_bytes(b"mine")
    with ControlClient(published.url) as client:
        with pytest.raises(KilnError) as refused:
            download_run(client, published.run_id, str(target))
        assert refused.value.code == "target_exists"
        assert _entries(target) == ["notes.txt"]
        stale = target / ARTIFACT_PATHS["train_receipt"]
        stale.write_bytes(b"{}")  # a layout file this run does not list
        with pytest.raises(KilnError) as refused:
            download_run(client, published.run_id, str(target), force=True)
        assert refused.value.code == "target_exists"
        assert _entries(target) == ["notes.txt", "train_receipt.json"]
        stale.unlink()
        (target / ARTIFACT_PATHS["dataset"]).write_bytes(b"old download")
        download_run(client, published.run_id, str(target), force=True)
    assert (target / "notes.txt").read_bytes() == b"mine"
    assert verify_run(target).run_id == published.run_id
    assert not [p for p in target.iterdir() if p.name.startswith(".")]


def test_a_file_tampered_on_the_server_downloads_nothing(
    published: Published, tmp_path: Path
) -> None:
    served = published.run_dir / ARTIFACT_PATHS["replay"]
    pristine = served.read_bytes()
    served.write_bytes(pristine[:-2] + bytes([pristine[-2] ^ 1]) + pristine[-1:])
    try:
        with ControlClient(published.url) as client, pytest.raises(ControlHttpStatus) as refused:
            download_run(client, published.run_id, str(tmp_path / "run"))
    finally:
        served.write_bytes(pristine)
    assert refused.value.code == "control_http_status"
    assert refused.value.server_code == "openenv_artifact_integrity_failed"
    assert list(tmp_path.iterdir()) == []


def test_cli_all_json_and_usage(published: Published, tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["openenv", "artifact", published.run_id, "--url", published.url]
    target = tmp_path / "run"
    ok = runner.invoke(app, [*base, "--all", "--output-dir", str(target), "--json"])
    assert ok.exit_code == 0, ok.output
    receipt = json.loads(ok.stdout)
    assert receipt["schema"] == "kiln-verify.run-download.v1"
    assert receipt["status_file"] == RUN_STATUS_FILE
    verified = runner.invoke(app, ["openenv", "verify-run", str(target)])
    assert verified.exit_code == 0, verified.output
    assert f"run {published.run_id} (rollout, rollout_ready) verified" in verified.stdout
    for wrong in (
        ["--all", "summary", "--output-dir", str(tmp_path / "x")],
        ["--all"],
        ["summary", "--output-dir", str(tmp_path / "x")],
    ):
        refused = runner.invoke(app, [*base, *wrong])
        assert refused.exit_code == 2, (wrong, refused.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_run_still_going_is_refused(
    published: Published, slow_bandit: OracleHandle, tmp_path: Path
) -> None:
    with httpx.Client(base_url=published.url, trust_env=False, timeout=60) as http:
        created = http.post("/v1/openenv/runs", json=small_request(slow_bandit.base_url, groups=4))
        assert created.status_code == 202, created.text
        run_id = created.json()["run_id"]
        try:
            with ControlClient(published.url) as client, pytest.raises(KilnError) as refused:
                download_run(client, run_id, str(tmp_path / "run"))
        finally:
            http.delete(f"/v1/openenv/runs/{run_id}")
            wait_terminal(http, run_id)
    assert refused.value.code == "artifact_manifest_invalid"
    assert "has ended" in refused.value.rule
    assert list(tmp_path.iterdir()) == []
