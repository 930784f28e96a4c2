"""Offline verification (kiln-openenv-contract §6): valid bundles, legacy relabels, paths,
typed failures with their locations, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.errors import (
    BundleDatasetDigestMismatch,
    BundleError,
    BundleReturnMismatch,
    BundleStatsMismatch,
    KilnError,
    PathMissing,
    PathSymlink,
)
from kiln_verify.openenv.records.serialize import report_bytes
from kiln_verify.openenv.records.summary import read_summary, relabel_as_v2
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.openenv.verify.candidates import parse_action_text
from kiln_verify.testing.bundles import FixtureBundle, build_fixture_bundle
from tests.openenv.records.fixtures import write_fixture_bundle


@pytest.fixture
def fixture_bundle(tmp_path: Path) -> FixtureBundle:
    return write_fixture_bundle(tmp_path / "fixture")


@pytest.fixture
def synthetic(tmp_path: Path) -> FixtureBundle:
    return build_fixture_bundle(tmp_path / "synthetic", groups=10, group_size=3)


def _edit_summary(bundle: FixtureBundle, edit: dict[str, object]) -> None:
    doc = json.loads(bundle.summary.read_bytes())
    doc.update(edit)
    bundle.summary.write_bytes(dumps_pretty(doc))


def test_reference_fixture_bundle_verifies(fixture_bundle: FixtureBundle) -> None:
    report = verify_bundle(fixture_bundle.summary)
    assert report.schema_ == "kiln.openenv-verification.v1"
    assert (report.groups, report.rollouts, report.environment_exchanges) == (1, 1, 2)
    assert report.dataset_path == os.fspath(fixture_bundle.dataset)
    assert report.replay_path == os.fspath(fixture_bundle.replay)
    summary = json.loads(fixture_bundle.summary.read_bytes())
    assert report.dataset_sha256 == summary["dataset_sha256"]
    assert report.replay_sha256 == summary["replay_sha256"]


def test_synthetic_bundle_with_every_termination_verifies(synthetic: FixtureBundle) -> None:
    report = verify_bundle(synthetic.summary)
    assert (report.groups, report.rollouts) == (10, 30)
    replay = json.loads(synthetic.replay.read_bytes())
    assert report.environment_exchanges == sum(
        len(c["exchanges"]) for g in replay["groups"] for c in g["candidates"]
    )
    terminations = {
        r["termination"] for r in json.loads(synthetic.summary.read_bytes())["rollouts"]
    }
    assert terminations == {"done", "max_steps", "protocol_error", "invalid_model_action"}


def test_action_schema_validation_failed_tail_verifies(synthetic: FixtureBundle) -> None:
    """Reference §17.1: Kiln's newest verifier refuses this code; ours accepts it."""
    assert b"ACTION_SCHEMA_VALIDATION_FAILED" in synthetic.dataset.read_bytes()
    verify_bundle(synthetic.summary)


@pytest.mark.parametrize("maker", ["fixture", "synthetic"])
def test_v2_relabel_still_verifies(maker: str, tmp_path: Path) -> None:
    bundle = (
        write_fixture_bundle(tmp_path)
        if maker == "fixture"
        else build_fixture_bundle(tmp_path, groups=4, group_size=2)
    )
    summary = read_summary(bundle.summary.read_bytes())
    relabelled = relabel_as_v2(summary, "sha256:" + "e" * 64)
    bundle.summary.write_bytes(dumps_pretty(relabelled.to_json()))
    assert relabelled.version == 2
    verify_bundle(bundle.summary)


def test_explicit_overrides_win(synthetic: FixtureBundle, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    moved.mkdir()
    dataset = moved / "corpus.jsonl"
    replay = moved / "replay.json"
    synthetic.dataset.rename(dataset)
    synthetic.replay.rename(replay)
    with pytest.raises(PathMissing):
        verify_bundle(synthetic.summary)
    report = verify_bundle(synthetic.summary, dataset_path=dataset, replay_path=replay)
    assert report.dataset_path == os.fspath(dataset)


def test_symlinked_corpus_is_refused(synthetic: FixtureBundle, tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    synthetic.dataset.rename(target)
    synthetic.dataset.symlink_to(target)
    with pytest.raises(PathSymlink):
        verify_bundle(synthetic.summary)


def test_failure_names_rule_file_and_location(synthetic: FixtureBundle) -> None:
    doc = json.loads(synthetic.summary.read_bytes())
    doc["rollouts"][4]["episode_return"] = 123.0
    synthetic.summary.write_bytes(dumps_pretty(doc))
    with pytest.raises(BundleReturnMismatch) as caught:
        verify_bundle(synthetic.summary)
    error = caught.value
    assert error.location == "group 1 candidate 1"
    assert error.path == os.fspath(synthetic.summary)
    assert "§6.9" in error.rule
    assert error.to_dict()["location"] == "group 1 candidate 1"
    assert str(error).startswith("bundle_return_mismatch: group 1 candidate 1: ")


def test_stats_are_recomputed_exactly(synthetic: FixtureBundle) -> None:
    doc = json.loads(synthetic.summary.read_bytes())
    doc["stats"]["mean_model_latency_ms"] += 1e-12
    synthetic.summary.write_bytes(dumps_pretty(doc))
    with pytest.raises(BundleStatsMismatch, match="mean_model_latency_ms"):
        verify_bundle(synthetic.summary)


def test_corrupt_corpus_line_reports_the_digest_first(synthetic: FixtureBundle) -> None:
    data = bytearray(synthetic.dataset.read_bytes())
    data[5] = ord("!")  # same size, the first line is no longer JSON
    synthetic.dataset.write_bytes(bytes(data))
    with pytest.raises(BundleDatasetDigestMismatch) as caught:
        verify_bundle(synthetic.summary)
    assert isinstance(caught.value.__cause__, KilnError)  # the parse error is kept


def test_every_bundle_error_is_a_bundle_error_family_member() -> None:
    from kiln_verify.errors import ERROR_CLASSES

    codes = {code for code, cls in ERROR_CLASSES.items() if issubclass(cls, BundleError)}
    # The paired evaluation reuses the family for its group location; every other member is
    # a verification failure and carries the bundle_ prefix.
    verification = codes - {"evaluation_pairing_mismatch"}
    assert len(verification) == 12
    assert all(code.startswith("bundle_") for code in verification)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":1}', {"a": 1}),
        ('thinking</think>\n\n{"a":1}', {"a": 1}),
        ('x</think>{"a":"</think>"}', {"a": "</think>"}),
        ('```json\n{"a":1}\n```', {"a": 1}),
        ("</think>```\n{}\n```", {}),
    ],
)
def test_action_text_parsing(text: str, expected: object) -> None:
    assert parse_action_text(text) == expected


@pytest.mark.parametrize("text", ["[1]", '{"a":1} trailing', "```json\n{}", "", "</think>"])
def test_action_text_parsing_refuses(text: str) -> None:
    with pytest.raises((KilnError, ValueError)):
        parse_action_text(text)


def test_cli_verify_json_report_and_errors(synthetic: FixtureBundle) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["openenv", "verify", "--summary", str(synthetic.summary), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = verify_bundle(synthetic.summary)
    assert result.stdout.encode() == report_bytes(report)

    human = runner.invoke(app, ["openenv", "verify", "--summary", str(synthetic.summary)])
    assert human.exit_code == 0
    assert "environment_exchanges" in human.stdout

    _edit_summary(synthetic, {"seed_start": 5})
    failed = runner.invoke(
        app, ["openenv", "verify", "--summary", str(synthetic.summary), "--json"]
    )
    assert failed.exit_code == 1
    error = json.loads(failed.stdout)["error"]
    assert error["code"] == "bundle_group_plan_mismatch"
    assert error["location"] == "group 0"
    assert error["path"] == os.fspath(synthetic.replay)

    plain = runner.invoke(app, ["openenv", "verify", "--summary", str(synthetic.summary)])
    assert plain.exit_code == 1
    assert "bundle_group_plan_mismatch: group 0:" in plain.stderr


def test_verifier_is_network_free() -> None:
    code = (
        "import sys, kiln_verify.openenv.verify\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('httpx', 'websockets')"
        " or m in ('kiln_verify.openenv.protocol.client',"
        " 'kiln_verify.openenv.protocol.session')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
