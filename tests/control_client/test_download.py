"""`openenv artifact` against the real server (a `kiln-verify serve` process) and a tamperer.

The real server proves the happy path end to end: three downloads that verify offline,
receipts without the base URL, no-clobber and ``--force``. The tampering proxy forwards to
the same server and breaks one rule at a time at the byte level (stubs only for faults a
real server cannot produce); the client must refuse each, write nothing, and leave no
staging file behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control_client.client import ControlClient
from kiln_verify.control_client.download import download_artifact
from kiln_verify.errors import KilnError
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.testing.serve import ServeProcess
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import run_to_end, small_request
from tests.control.tamper import TamperProxy, tamper_proxy

FILES = {
    "dataset": "openenv.rollouts.jsonl",
    "replay": "openenv.replay.json",
    "summary": "openenv.rollout-summary.json",
}


@dataclass(frozen=True)
class Published:
    url: str
    run_id: str
    status: dict[str, object]
    proxy: TamperProxy


@pytest.fixture(scope="module")
def published(serve_process: ServeProcess, bandit: OracleHandle) -> Iterator[Published]:
    with httpx.Client(base_url=serve_process.url, trust_env=False, timeout=60) as http:
        status = run_to_end(http, small_request(bandit.base_url, groups=2))
    assert status["state"] == "rollout_ready", status
    with tamper_proxy(serve_process.url) as proxy:
        yield Published(serve_process.url, str(status["run_id"]), status, proxy)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_downloads_verify_offline_and_receipts_never_name_the_server(
    published: Published, tmp_path: Path
) -> None:
    receipts = []
    with ControlClient(published.url) as client:
        for kind, name in FILES.items():
            receipts.append(download_artifact(client, published.run_id, kind, str(tmp_path / name)))
    for receipt in receipts:
        data = receipt.to_json()
        assert data["schema"] == "kiln.openenv-artifact-download.v1"
        assert data["source_url"] == f"/v1/openenv/runs/{published.run_id}/artifacts/{data['kind']}"
        assert published.url not in json.dumps(data)
        assert "127.0.0.1" not in json.dumps(data)
    manifest = {item["kind"]: item for item in published.status["artifacts"]}  # type: ignore[attr-defined]
    for receipt in receipts:
        assert receipt.sha256 == manifest[receipt.kind]["sha256"]
        assert receipt.bytes == (tmp_path / FILES[receipt.kind]).stat().st_size
    report = verify_bundle(tmp_path / FILES["summary"])
    assert report.rollouts == 4
    assert _leftovers(tmp_path) == []


def test_existing_output_is_kept_unless_force(published: Published, tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_bytes(b"precious")
    published.proxy.seen.clear()
    with ControlClient(published.proxy.url) as client:
        with pytest.raises(KilnError) as refused:
            download_artifact(client, published.run_id, "summary", str(target))
        assert refused.value.code == "target_exists"
        assert target.read_bytes() == b"precious"
        assert not [path for _, path, _ in published.proxy.seen if "/artifacts/" in path]
        receipt = download_artifact(client, published.run_id, "summary", str(target), force=True)
    assert target.stat().st_size == receipt.bytes
    assert [enc for _, path, enc in published.proxy.seen if "/artifacts/" in path] == ["identity"]
    assert _leftovers(tmp_path) == []


TAMPERING = [
    ("wrong-etag", "artifact_headers_invalid"),
    ("weak-etag", "artifact_headers_invalid"),
    ("no-nosniff", "artifact_headers_invalid"),
    ("no-cache-control", "artifact_headers_invalid"),
    ("public-cache", "artifact_headers_invalid"),
    ("no-content-length", "artifact_headers_invalid"),
    ("length-mismatch", "artifact_headers_invalid"),
    ("gzip", "artifact_headers_invalid"),
    ("same-length-mutation", "artifact_body_invalid"),
    ("truncated", "artifact_body_invalid"),
    ("longer", "artifact_body_invalid"),
    ("redirect", "control_redirect"),
    ("status-absolute-url", "artifact_manifest_invalid"),
]


@pytest.mark.parametrize(("mode", "code"), TAMPERING, ids=[mode for mode, _ in TAMPERING])
def test_tampered_downloads_are_refused_and_leave_nothing(
    published: Published, tmp_path: Path, mode: str, code: str
) -> None:
    published.proxy.mode = mode
    target = tmp_path / "dataset.jsonl"
    try:
        with ControlClient(published.proxy.url) as client, pytest.raises(KilnError) as refused:
            download_artifact(client, published.run_id, "dataset", str(target))
    finally:
        published.proxy.mode = "pass"
    assert refused.value.code == code, refused.value
    assert not target.exists()
    assert _leftovers(tmp_path) == []


def test_a_kind_outside_the_manifest_is_refused_before_any_download(
    published: Published, tmp_path: Path
) -> None:
    published.proxy.seen.clear()
    with ControlClient(published.proxy.url) as client, pytest.raises(KilnError) as refused:
        download_artifact(client, published.run_id, "train_receipt", str(tmp_path / "x"))
    assert refused.value.code == "artifact_manifest_invalid"
    assert [path for _, path, _ in published.proxy.seen] == [f"/v1/openenv/runs/{published.run_id}"]


def test_cli_prints_the_receipt_and_exits_1_on_tampering(
    published: Published, tmp_path: Path
) -> None:
    runner = CliRunner()
    target = tmp_path / "replay.json"
    ok = runner.invoke(
        app,
        [
            "openenv",
            "artifact",
            published.run_id,
            "replay",
            "--output",
            str(target),
            "--json",
            "--url",
            published.url,
        ],
    )
    assert ok.exit_code == 0, ok.output
    receipt = json.loads(ok.stdout)
    assert receipt["kind"] == "replay"
    assert receipt["output_path"] == str(target)
    assert published.url not in ok.stdout
    published.proxy.mode = "same-length-mutation"
    try:
        bad = runner.invoke(
            app,
            [
                "openenv",
                "artifact",
                published.run_id,
                "replay",
                "--output",
                str(tmp_path / "other.json"),
                "--url",
                published.proxy.url,
            ],
        )
    finally:
        published.proxy.mode = "pass"
    assert bad.exit_code == 1
    assert "artifact_body_invalid" in bad.stderr
    assert not (tmp_path / "other.json").exists()


def test_no_route_follows_a_redirect(published: Published, tmp_path: Path) -> None:
    published.proxy.mode = "redirect-everything"
    try:
        with ControlClient(published.proxy.url) as client:
            for call in (
                lambda: client.status(published.run_id),
                lambda: client.runs(),
                lambda: client.start({"environment_urls": ["http://127.0.0.1:1"]}),
                lambda: client.cancel(published.run_id),
            ):
                with pytest.raises(KilnError) as refused:
                    call()
                assert refused.value.code == "control_redirect"
    finally:
        published.proxy.mode = "pass"
    assert all(path.startswith("/v1/") for _, path, _ in published.proxy.seen)


def test_status_statistics_are_the_ones_the_summary_binds(
    published: Published, tmp_path: Path
) -> None:
    with ControlClient(published.url) as client:
        download_artifact(client, published.run_id, "summary", str(tmp_path / "s.json"))
    summary = json.loads((tmp_path / "s.json").read_bytes())
    assert published.status["rollout_stats"] == summary["stats"]
    assert published.status["environments"] == [e["identity"] for e in summary["environments"]]
