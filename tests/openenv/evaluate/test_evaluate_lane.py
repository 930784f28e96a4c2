"""The oracle lane end to end, the offline form, receipt determinism, training overlap, CLI."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import EvaluationPairingMismatch, TargetExists, UsageError
from kiln_verify.openenv.collect import run_collection
from kiln_verify.openenv.evaluate import (
    TrainingInterval,
    evaluate_bundles,
    run_evaluation,
)
from kiln_verify.openenv.records.evaluation import EnvironmentEvalGate
from oracle.runner import ServerConfig, start_server
from tests.openenv.collect.options import make_controls
from tests.openenv.evaluate.conftest import LANE, Lane, best, summary_of, worst

GATE = EnvironmentEvalGate(min_mean_improvement=0.0)


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def _collect(lane: Lane, directory: Path, policy_worst: bool, **overrides: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    controls = lane.controls(
        output=str(directory / "d.jsonl"),
        replay_output=str(directory / "r.json"),
        summary_output=str(directory / "s.json"),
        **overrides,
    )
    asyncio.run(run_collection(controls, worst() if policy_worst else best()))
    return directory / "s.json"


def test_oracle_lane_passes(lane: Lane) -> None:
    receipt = lane.evaluation.receipt
    evidence = receipt.evidence
    assert evidence.decision == "passed"
    assert receipt.outcome == "kept"
    assert evidence.regressed_groups == 0
    assert evidence.improved_groups >= 15
    assert evidence.paired_groups == 20
    assert evidence.paired_episodes == 20
    assert evidence.candidate_mean_return > evidence.baseline_mean_return
    assert receipt.seed_start == 1000
    assert receipt.config.seed_start == 1000
    assert _files(lane.directory) == [
        "baseline/openenv.replay.json",
        "baseline/openenv.rollout-summary.json",
        "baseline/openenv.rollouts.jsonl",
        "candidate/openenv.replay.json",
        "candidate/openenv.rollout-summary.json",
        "candidate/openenv.rollouts.jsonl",
        "receipt.json",
    ]
    data = (lane.directory / "receipt.json").read_bytes()
    assert data == lane.evaluation.data
    assert data.endswith(b"}\n")
    assert json.loads(data)["schema"] == "kiln.openenv-environment-evaluation.v1"
    for side in ("baseline", "candidate"):
        digest = hashlib.sha256(summary_of(lane.directory, side).read_bytes()).hexdigest()
        assert json.loads(data)[f"{side}_summary_sha256"] == f"sha256:{digest}"
    # the two sides were collected with identical options, different policies
    assert receipt.baseline != receipt.candidate
    assert lane.evaluation.baseline.rollouts == lane.evaluation.candidate.rollouts == 20


def test_offline_form_and_receipt_determinism(lane: Lane, tmp_path: Path) -> None:
    base, cand = summary_of(lane.directory, "baseline"), summary_of(lane.directory, "candidate")
    first = evaluate_bundles(base, cand, gate=GATE, receipt_path=tmp_path / "a.json")
    second = evaluate_bundles(base, cand, gate=GATE, receipt_path=tmp_path / "b.json")
    assert first.data == second.data == lane.evaluation.data
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    with pytest.raises(TargetExists):
        evaluate_bundles(base, cand, gate=GATE, receipt_path=tmp_path / "a.json")
    forced = evaluate_bundles(base, cand, gate=GATE, receipt_path=tmp_path / "a.json", force=True)
    assert forced.data == first.data
    diagnostic = evaluate_bundles(base, cand)
    assert diagnostic.receipt.evidence.decision == "diagnostic"
    assert diagnostic.receipt.outcome == "diagnostic"
    assert "gate" not in diagnostic.receipt.config.to_json()
    # swapping the sides is a significant regression
    swapped = evaluate_bundles(cand, base, gate=GATE)
    assert swapped.receipt.evidence.decision == "rejected"
    assert swapped.receipt.evidence.regressed_groups >= 15


def test_offline_form_verifies_both_bundles_first(lane: Lane, tmp_path: Path) -> None:
    # recorded paths are absolute: tamper with a fresh candidate bundle, not a copy
    summary = _collect(lane, tmp_path / "fresh", False)
    corpus = tmp_path / "fresh" / "d.jsonl"
    data = bytearray(corpus.read_bytes())
    data[10] ^= 1
    corpus.write_bytes(bytes(data))
    result = CliRunner().invoke(
        app,
        [
            "openenv",
            "evaluate",
            "--baseline-summary",
            str(summary_of(lane.directory, "baseline")),
            "--candidate-summary",
            str(summary),
            "--json",
        ],
    )
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"]["code"].startswith("bundle_")


def test_collections_against_drifted_servers_are_not_paired(lane: Lane, tmp_path: Path) -> None:
    baseline = summary_of(lane.directory, "baseline")
    shifted = _collect(lane, tmp_path / "shifted", False, seed_start=1001)
    with pytest.raises(EvaluationPairingMismatch) as caught:
        evaluate_bundles(baseline, shifted, gate=GATE)
    assert caught.value.location == "options"
    other = start_server(ServerConfig("bandit", max_sessions=1))
    try:
        controls = make_controls(
            [other.base_url],
            **LANE,
            output=str(tmp_path / "d.jsonl"),
            replay_output=str(tmp_path / "r.json"),
            summary_output=str(tmp_path / "s.json"),
        )
        asyncio.run(run_collection(controls, best()))
    finally:
        other.stop()
    result = CliRunner().invoke(
        app,
        [
            "openenv",
            "evaluate",
            "--baseline-summary",
            str(baseline),
            "--candidate-summary",
            str(tmp_path / "s.json"),
            "--receipt",
            str(tmp_path / "receipt.json"),
        ],
    )
    assert result.exit_code == 1
    assert "evaluation_pairing_mismatch" in result.output
    assert "environment 0" in result.output
    assert not (tmp_path / "receipt.json").exists()


def test_training_overlap_is_refused_before_any_network_contact(tmp_path: Path) -> None:
    controls = make_controls(["http://127.0.0.1:9"], **LANE)
    with pytest.raises(UsageError, match="overlap"):
        asyncio.run(
            run_evaluation(controls, worst(), best(), tmp_path, training=TrainingInterval(1019, 5))
        )
    with pytest.raises(UsageError, match="at least 20 groups"):
        asyncio.run(
            run_evaluation(
                make_controls(["http://127.0.0.1:9"], **{**LANE, "groups": 19}),
                worst(),
                best(),
                tmp_path,
                gate=GATE,
            )
        )
    args = ["openenv", "evaluate", "--environment", "http://127.0.0.1:9"]
    args += ["--baseline-policy", "random", "--candidate-policy", "random"]
    args += ["--output-dir", str(tmp_path / "out"), "--seed-start", "1000"]
    args += ["--training-seed-start", "990", "--training-groups", "11"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "overlap" in result.output
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []


def test_training_overlap_is_refused_offline(lane: Lane) -> None:
    base, cand = summary_of(lane.directory, "baseline"), summary_of(lane.directory, "candidate")
    with pytest.raises(UsageError):
        evaluate_bundles(base, cand, training=TrainingInterval(1010, 100))
    adjacent = evaluate_bundles(base, cand, gate=GATE, training=TrainingInterval(0, 1000))
    assert "seed_start" not in adjacent.receipt.config.to_json()  # derived from training
    assert adjacent.receipt.seed_start == 1000


def _script(tmp_path: Path, arm: int) -> str:
    path = tmp_path / f"arm{arm}.json"
    path.write_text(json.dumps([json.dumps({"arm": arm})]))
    return str(path)


def test_cli_live_form_on_the_embedded_oracle(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = ["openenv", "evaluate", "--output-dir", str(out), "--max-steps", "1"]
    args += ["--no-thinking", "--training-seed-start", "0", "--training-groups", "500"]
    args += ["--baseline-policy", "scripted", "--baseline-policy-option"]
    args += [f"script={_script(tmp_path, 0)}", "--candidate-policy", "scripted"]
    args += ["--candidate-policy-option", f"script={_script(tmp_path, 0)}", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output  # diagnostic: no gate
    receipt = json.loads(result.stdout)
    assert receipt["evidence"]["decision"] == "diagnostic"
    assert receipt["evidence"]["tied_groups"] == 20
    assert receipt["evidence"]["exact_sign_test_p_value"] == 1.0
    assert receipt["seed_start"] == 500
    assert result.stdout.encode() == (out / "receipt.json").read_bytes()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 1
    assert "target_exists" in again.output
    gated = CliRunner().invoke(app, [*args, "--force", "--min-mean-improvement", "0"])
    assert gated.exit_code == 1, gated.output  # inconclusive: all tied
    assert json.loads(gated.stdout)["evidence"]["decision"] == "inconclusive"
    offline = ["openenv", "evaluate", "--min-mean-return", "5"]
    offline += ["--baseline-summary", str(out / "baseline" / "openenv.rollout-summary.json")]
    offline += ["--candidate-summary", str(out / "candidate" / "openenv.rollout-summary.json")]
    table = CliRunner().invoke(app, offline)
    assert table.exit_code == 1  # rejected by min_mean_return
    assert "rejected" in table.output


@pytest.mark.parametrize(
    "extra",
    [
        ["--baseline-policy", "random"],
        ["--candidate-policy", "random"],
        ["--baseline-summary", "x.json"],
        ["--baseline-summary", "a", "--candidate-summary", "b", "--baseline-policy", "random"],
        [
            "--baseline-summary",
            "a",
            "--candidate-summary",
            "b",
            "--receipt",
            "r",
            "--output-dir",
            "o",
        ],
        ["--baseline-policy", "random", "--candidate-policy", "random", "--receipt", "r.json"],
        ["--baseline-policy", "random", "--candidate-policy", "random", "--training-groups", "3"],
        [
            "--baseline-policy",
            "random",
            "--candidate-policy",
            "random",
            "--min-mean-improvement",
            "-1",
        ],
        ["--baseline-policy", "random", "--candidate-policy", "random", "--groups", "0"],
        ["--baseline-policy", "random", "--candidate-policy", "nonsense"],
        [
            "--baseline-policy",
            "random",
            "--candidate-policy",
            "random",
            "--groups",
            "5",
            "--min-mean-return",
            "0",
        ],
    ],
)
def test_cli_usage_errors(
    extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["openenv", "evaluate", *extra])
    assert result.exit_code == 2, result.output
    assert list(tmp_path.iterdir()) == []
