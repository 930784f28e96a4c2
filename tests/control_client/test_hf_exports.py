"""``kiln-verify hf export-* --url``, ``hf list`` and ``hf delete`` over real sockets.

Against ``serve --model`` (the tiny model) for the honest path, and against a tampering
stub (:mod:`tests.control_client.hf_stub`) for what a real server never sends. Every
refusal is checked for its exact code, for an absent output and for an output directory
holding no staging file or scratch directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.hf.bundle_files import EXPORT_MANIFEST
from kiln_verify.hf.export import export_sft
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.manifest import read_export
from kiln_verify.hf.manifest.http_exports import ExportSummary
from kiln_verify.hf.verify import verify_hf_path
from kiln_verify.server.runner import ServerHandle
from tests import models
from tests.control.support import resident_config, running
from tests.control_client.hf_stub import Script, tampering_server
from tests.hf.export.conftest import ROWS

pytest.importorskip("torch")
pytest.importorskip("tokenizers")

runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[ServerHandle]:
    with running(resident_config(tmp_path_factory.mktemp("state"), tiny_model)) as handle:
        yield handle


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rows") / "messages.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, rows: Path) -> Script:
    """A real export's archive and summary (what an honest server answers)."""
    out = tmp_path_factory.mktemp("honest")
    outcome = export_sft(
        ExportSource(model=tiny_model),
        dataset=rows,
        name="stubbed",
        output=out / "stubbed.kiln-hf.tar.gz",
    )
    manifest = read_export((outcome.directory / EXPORT_MANIFEST).read_bytes())
    summary = ExportSummary.of("stubbed", manifest).to_json()
    return Script(summary=summary, archive=outcome.archive.read_bytes())


def cli(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def export_sft_url(url: str, output: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    name = output.name.removesuffix(".kiln-hf.tar.gz")
    return cli("hf", "export-sft", "--url", url, "--name", name, "--output", str(output), *extra)


def clean(directory: Path, *published: str) -> None:
    """Only ``published`` in ``directory``: no staging file, no scratch directory."""
    assert sorted(os.listdir(directory)) == sorted(published)


def test_export_over_http_publishes_the_verified_archive_and_cleans_up(
    server: ServerHandle, rows: Path, tmp_path: Path, honest: Script
) -> None:
    out = tmp_path / "stubbed.kiln-hf.tar.gz"
    code, report = export_sft_url(server.base_url, out, "--file", str(rows))
    assert code == 0, report
    assert report["status"] == "exported"
    assert report["export_sha256"] == honest.summary["export_sha256"]
    assert report["server_copy"] == "deleted"
    assert out.read_bytes() == honest.archive  # the local export's bytes
    assert os.stat(out).st_mode & 0o777 == 0o600
    assert verify_hf_path(out).export_sha256 == report["export_sha256"]
    clean(tmp_path, out.name)
    assert cli("hf", "list", "--url", server.base_url) == (0, {"data": []})

    kept = tmp_path / "kept_01.kiln-hf.tar.gz"
    code, report = export_sft_url(server.base_url, kept, "--file", str(rows), "--keep-server-copy")
    assert (code, report["server_copy"]) == (0, "kept")
    code, listed = cli("hf", "list", "--url", server.base_url)
    assert [entry["name"] for entry in listed["data"]] == ["kept_01"]
    code, refused = cli(
        "hf", "delete", "--url", server.base_url, "--name", "kept_01",
        "--export-sha256", "sha256:" + "0" * 64,
    )  # fmt: skip
    assert code == 1
    assert refused["error"]["code"] == "control_http_status"
    assert refused["error"]["server_code"] == "hf_trl_export_precondition_failed"
    assert cli(
        "hf", "delete", "--url", server.base_url, "--name", "kept_01",
        "--export-sha256", report["export_sha256"],
    ) == (0, {"status": "deleted", "name": "kept_01"})  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "prepare"),
    [
        (("--file", "/srv/rows.jsonl", "--dataset", "d"), None),
        ((), None),
        (("--file", "/srv/rows.jsonl", "--model", "/m"), None),
        (("--file", "/srv/rows.jsonl", "--split-manifest", "{split}"), "[1, 2]"),
        (("--file", "/srv/rows.jsonl", "--split-manifest", "{split}"), "{bad"),
        (("--file", "/srv/rows.jsonl"), "exists"),
    ],
)
def test_refusals_before_any_request(
    tmp_path: Path, extra: tuple[str, ...], prepare: str | None
) -> None:
    script = Script(summary={}, archive=b"")
    out = tmp_path / "pre.kiln-hf.tar.gz"
    split = tmp_path / "split.json"
    if prepare == "exists":
        out.write_bytes(b"mine")
    elif prepare is not None:
        split.write_text(prepare)
    args = [value.format(split=split) for value in extra]
    with tampering_server(script) as url:
        code, report = export_sft_url(url, out, *args)
        bad_name = cli("hf", "export-sft", "--url", url, "--name", "-x", "--file", "/f")
        missing_dir = export_sft_url(url, tmp_path / "none" / "a.kiln-hf.tar.gz", "--file", "/f")
    expected = "target_exists" if prepare == "exists" else "usage"
    assert (code, report["error"]["code"]) == (1 if prepare == "exists" else 2, expected)
    assert (bad_name[0], bad_name[1]["error"]["code"]) == (2, "usage")
    assert (missing_dir[0], missing_dir[1]["error"]["code"]) == (2, "usage")
    assert script.seen == []


def _refused(script: Script, tmp_path: Path, expected: str) -> dict[str, Any]:
    out = tmp_path / "stubbed.kiln-hf.tar.gz"
    with tampering_server(script) as url:
        code, report = export_sft_url(url, out, "--file", "/srv/rows.jsonl")
    assert code == 1, report
    assert report["error"]["code"] == expected, report
    clean(tmp_path)
    assert not any(line.startswith("DELETE") for line in script.seen)
    return report


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"create_etag": 'W/"{digest}"'}, "hf_export_response_invalid"),
        ({"create_etag": ""}, "hf_export_response_invalid"),
        ({"create_etag": '"sha256:' + "1" * 64 + '"'}, "hf_export_response_invalid"),
        ({"download_etag": ""}, "hf_export_download_invalid"),
        ({"download_etag": 'W/"{digest}"'}, "hf_export_download_invalid"),
        ({"download_status": 302, "location": "http://elsewhere.example/x"}, "control_redirect"),
        ({"length": "+64"}, "hf_export_download_invalid"),
        ({"tail": b"extra"}, "hf_export_download_invalid"),
        ({"chunked": True, "tail": b"extra"}, "hf_export_download_invalid"),
        ({"archive": "truncate"}, "hf_export_download_invalid"),
    ],
)
def test_tampered_answers_publish_nothing(
    honest: Script, tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    digest = honest.summary["export_sha256"]
    script = Script(summary=honest.summary, archive=honest.archive)
    for key, value in change.items():
        if isinstance(value, str) and "{digest}" in value:
            value = value.format(digest=digest)
        if key == "length":
            value = len(honest.archive) + 64
        if value == "truncate":
            value = honest.archive[: len(honest.archive) // 2]
        setattr(script, key, value)
    _refused(script, tmp_path, expected)


def test_a_chunked_honest_download_is_accepted(honest: Script, tmp_path: Path) -> None:
    script = Script(summary=honest.summary, archive=honest.archive, chunked=True)
    out = tmp_path / "stubbed.kiln-hf.tar.gz"
    with tampering_server(script) as url:
        code, report = export_sft_url(url, out, "--file", "/srv/rows.jsonl")
    assert code == 0, report
    assert out.read_bytes() == honest.archive
    assert script.seen[-1] == f'DELETE /v1/train/hf/exports/stubbed "{report["export_sha256"]}"'


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_same_length_mutations_of_a_download_are_refused(
    honest: Script, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    position = data.draw(st.integers(0, len(honest.archive) - 1), label="position")
    flip = data.draw(st.integers(1, 255), label="xor")
    mutated = bytearray(honest.archive)
    mutated[position] ^= flip
    script = Script(summary=honest.summary, archive=bytes(mutated))
    _refused(script, tmp_path_factory.mktemp("mutation"), "hf_export_download_invalid")


def test_a_failed_cleanup_keeps_the_verified_archive_and_says_how_to_retry(
    honest: Script, tmp_path: Path
) -> None:
    script = Script(summary=honest.summary, archive=honest.archive, delete_status=500)
    out = tmp_path / "stubbed.kiln-hf.tar.gz"
    with tampering_server(script) as url:
        code, report = export_sft_url(url, out, "--file", "/srv/rows.jsonl")
    assert code == 1
    assert report["error"]["code"] == "hf_export_cleanup_failed"
    digest = honest.summary["export_sha256"]
    assert report["error"]["hint"] == (
        f"retry with: kiln-verify hf delete --url {url} --name stubbed --export-sha256 {digest}"
    )
    assert out.read_bytes() == honest.archive
    clean(tmp_path, out.name)


def test_grpo_export_over_http_is_the_local_export(
    server: ServerHandle, tiny_model: Path, tmp_path: Path
) -> None:
    from kiln_verify.hf.export import export_grpo
    from tests.hf.grpo_corpus import synthetic_groups, write_groups

    corpus = write_groups(tmp_path / "groups.jsonl", synthetic_groups(tiny_model))
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "grpo_1.kiln-hf.tar.gz"
    code, report = cli(
        "hf", "export-grpo", "--url", server.base_url, "--name", "grpo_1",
        "--file", str(corpus), "--output", str(out),
    )  # fmt: skip
    assert code == 0, report
    assert (report["task"], report["row_count"]) == ("grpo", 2)
    local = export_grpo(
        ExportSource(model=tiny_model),
        dataset=corpus,
        name="grpo_1",
        output=tmp_path / "grpo_1.kiln-hf.tar.gz",
        source_name=str(corpus),
    )
    assert out.read_bytes() == local.archive.read_bytes()
    clean(tmp_path / "out", out.name)
