"""verify_run on a real train-run directory: it passes, and each link tampered once fails
with its own code (a forgery re-signs run.json's manifest so only that link can catch it)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.layout import ARTIFACT_PATHS, RUN_STATUS_FILE
from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.errors import ERROR_CLASSES, KilnError, RunChainBroken
from kiln_verify.openenv.runcheck.engine import verify_run
from kiln_verify.openenv.runcheck.schema_export import CONTRACT
from tests.openenv.runcheck.support import ADAPTER, TrainRun

FAILED = {
    "schema": "kiln.openenv-run-failure.v1",
    "code": "environment_evaluation_failed",
    "stage": "environment_evaluation",
    "retryable": False,
    "message": "the evaluation's two halves do not pair",
    "hint": "check the environment for drift",
    "occurred_unix_ms": 2,
}


def test_a_complete_train_run_verifies_every_link(run: TrainRun) -> None:
    report = run.verify()
    assert (report.run_kind, report.state) == ("train", "completed")
    assert [f.kind for f in report.files] == list(ARTIFACT_PATHS)
    assert [b.name for b in report.bundles] == ["run", "baseline", "candidate"]
    assert report.training is not None
    assert (report.training.output_adapter, report.training.adapter_files) == (ADAPTER, 3)
    assert report.evaluation is not None
    assert (report.evaluation.decision, report.evaluation.outcome) == ("passed", "promoted")
    assert report.links == [
        "run bundle",
        "evaluation bundles",
        "run status manifest",
        "training contract",
        "training selection",
        "training chain",
        "paired evaluation",
    ]
    assert report.to_json()["schema"] == "kiln-verify.run-verification.v1"


def test_a_rollout_bundle_alone_verifies(run: TrainRun, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for kind in ("dataset", "replay", "summary"):
        shutil.copyfile(run.path(kind), bundle / ARTIFACT_PATHS[kind])
    report = verify_run(bundle)
    assert (report.run_id, report.training, report.evaluation) == (None, None, None)
    assert report.links == ["run bundle", "training selection"]  # its summary records one
    with pytest.raises(KilnError) as refused:
        verify_run(bundle, adapter_dir=run.adapter)
    assert refused.value.code == "usage"


def test_a_server_run_directory_keeps_its_adapter_in_quarantine(run: TrainRun) -> None:
    quarantine = run.directory / "trainer" / "candidate"
    quarantine.mkdir(parents=True)
    shutil.move(run.adapter, quarantine / ADAPTER)
    assert run.verify(adapter_dir=None).training is not None
    (quarantine / ADAPTER / "adapter_config.json").write_bytes(b"{}\n")
    assert run.code(adapter_dir=None) == "training_chain_adapter_mismatch"


def test_every_run_chain_code_names_its_two_records() -> None:
    codes = [code for code, cls in ERROR_CLASSES.items() if issubclass(cls, RunChainBroken)]
    assert len(codes) == 11
    for code in codes:
        error = ERROR_CLASSES[code]("x")
        assert isinstance(error, RunChainBroken)
        left, right = error.records
        assert str(error).startswith(f"{code}: {left} and {right} disagree: x")
        assert error.to_dict()["records"] == [left, right]


def test_pieces_missing(run: TrainRun) -> None:
    assert run.code(adapter_dir=None) == "usage"
    run.path("adapter_manifest").unlink()
    assert run.code() == "run_chain_incomplete"
    run.path("train_receipt").unlink()
    assert run.code() == "run_chain_incomplete"  # an evaluation without its training
    (run.directory / RUN_STATUS_FILE).unlink()
    assert run.code() == "run_chain_incomplete"


def test_a_completed_run_that_leaves_its_evidence_out_is_incomplete(run: TrainRun) -> None:
    evidence = [k for k in ARTIFACT_PATHS if k not in ("dataset", "replay", "summary")]
    status = run.status()
    status["artifacts"] = [a for a in status["artifacts"] if a["kind"] not in evidence]
    run.write_status(status)
    for kind in evidence:
        run.path(kind).unlink()
    # the status still says the trainer and the evaluation completed: not this directory
    assert run.code(adapter_dir=None) == "run_chain_incomplete"
    del status["environment_evaluation"]
    run.write_status(status)
    assert run.code(adapter_dir=None) == "run_chain_incomplete"
    status["state"] = "failed"  # a failed run binds no evidence, whatever its trainer did
    status["failure"] = FAILED
    run.write_status(status)
    assert run.verify(adapter_dir=None).training is None


def test_bundles(run: TrainRun) -> None:
    replay = run.path("environment_eval_candidate_replay")
    data = bytearray(replay.read_bytes())
    data[-3] ^= 1
    replay.write_bytes(bytes(data))
    assert run.code() == "bundle_replay_digest_mismatch"


def test_manifest_and_files(run: TrainRun) -> None:
    receipt = run.path("train_receipt")
    receipt.write_bytes(receipt.read_bytes() + b"\n")
    assert run.code() == "run_chain_file_mismatch"
    run.remanifest()
    status = run.status()
    status["artifacts"] = [a for a in status["artifacts"] if a["kind"] != "adapter_manifest"]
    run.write_status(status)
    assert run.code() == "run_chain_file_mismatch"  # a file the manifest does not list


def test_contract(run: TrainRun) -> None:
    status = run.status()
    status["training_contract"]["effective_config"]["lora_rank"] = 64
    run.write_status(status)
    assert run.code() == "run_chain_contract_mismatch"


def test_selection(run: TrainRun) -> None:
    summary = run.read_json("summary")
    summary["training_selection"]["no_reward_gradient_groups_skipped"] += 1
    run.write_json("summary", summary)
    assert run.code() == "run_chain_selection_mismatch"


def test_training_chain(run: TrainRun) -> None:
    (run.adapter / "adapter_config.json").write_bytes(b'{"r": 8}\n')
    assert run.code() == "training_chain_adapter_mismatch"
    (run.adapter / "adapter_config.json").write_bytes(b'{"r": 4}\n')
    status = run.status()
    status["training"]["training_data"]["openenv"]["group_plan_sha256"] = "sha256:" + "1" * 64
    run.write_status(status)
    assert run.code() == "training_chain_status_mismatch"


def test_evaluation_summaries(run: TrainRun) -> None:
    receipt = run.read_json("environment_eval_receipt")
    receipt["candidate_summary_sha256"] = receipt["baseline_summary_sha256"]
    run.write_json("environment_eval_receipt", receipt)
    assert run.code() == "run_chain_evaluation_summary_mismatch"


def test_evaluation_seeds_held_out(run: TrainRun) -> None:
    receipt = run.read_json("environment_eval_receipt")
    receipt["seed_start"] = 2
    run.write_json("environment_eval_receipt", receipt)
    assert run.code() == "run_chain_evaluation_seeds_overlap"


def test_evaluation_pairing(run: TrainRun) -> None:
    """The training bundle forged in as the baseline: it verifies, but is not paired."""
    for part in ("dataset", "replay", "summary"):
        shutil.copyfile(run.path(part), run.path(f"environment_eval_baseline_{part}"))
    receipt = run.read_json("environment_eval_receipt")
    receipt["baseline_summary_sha256"] = str(sha256_bytes(run.path("summary").read_bytes()))
    run.write_json("environment_eval_receipt", receipt)
    assert run.code() == "evaluation_pairing_mismatch"


@pytest.mark.parametrize(
    ("side", "code"),
    [
        ("baseline", "run_chain_evaluation_baseline_mismatch"),
        ("candidate", "run_chain_evaluation_candidate_mismatch"),
    ],
)
def test_evaluation_policies(run: TrainRun, side: str, code: str) -> None:
    receipt = run.read_json("environment_eval_receipt")
    receipt[side]["adapter"] = "someone-else"
    run.write_json("environment_eval_receipt", receipt)
    assert run.code() == code


def test_evaluation_evidence_recomputes_exactly(run: TrainRun) -> None:
    receipt = run.read_json("environment_eval_receipt")
    p = receipt["evidence"]["exact_sign_test_p_value"]
    receipt["evidence"]["exact_sign_test_p_value"] = math.nextafter(p, 1.0)  # one ulp
    run.write_json("environment_eval_receipt", receipt)
    assert run.code() == "run_chain_evaluation_evidence_mismatch"


def test_outcome_follows_the_gate_and_auto_load(run: TrainRun) -> None:
    receipt = run.read_json("environment_eval_receipt")
    receipt["outcome"] = "kept"  # a passed gate with auto_load true is promoted (or error)
    run.write_json("environment_eval_receipt", receipt)
    assert run.code() == "run_chain_outcome_mismatch"


def test_status_repeats_the_receipt(run: TrainRun) -> None:
    status = run.status()
    status["environment_evaluation"]["outcome"] = "error"
    run.write_status(status)
    assert run.code() == "run_chain_status_evaluation_mismatch"


def test_cli_report_exit_codes(run: TrainRun) -> None:
    runner = CliRunner()
    base = ["openenv", "verify-run", str(run.directory)]
    ok = runner.invoke(app, [*base, "--adapter", str(run.adapter), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["evaluation"]["outcome"] == "promoted"
    human = runner.invoke(app, [*base, "--adapter", str(run.adapter)])
    assert human.exit_code == 0
    assert f"adapter {ADAPTER} (3 files" in human.stdout
    assert runner.invoke(app, base).exit_code == 2
    status = run.status()
    status["environment_evaluation"]["outcome"] = "error"
    (run.directory / RUN_STATUS_FILE).write_bytes(dumps_pretty(status))
    bad = runner.invoke(app, [*base, "--adapter", str(run.adapter), "--json"])
    assert bad.exit_code == 1
    error = json.loads(bad.stdout)["error"]
    assert error["code"] == "run_chain_status_evaluation_mismatch"
    assert error["records"] == ["run status", "environment_eval_receipt"]


def test_the_checked_in_contract_is_current() -> None:
    assert CONTRACT.path.read_bytes() == CONTRACT.data(), (
        "contracts/kiln-verify-run-v1.schema.json drifted; run "
        "python -m kiln_verify.openenv.runcheck.schema_export"
    )


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(kind=st.sampled_from(sorted(ARTIFACT_PATHS)), where=st.floats(0, 1), bit=st.integers(0, 7))
def test_no_flipped_bit_of_any_artifact_verifies(
    run: TrainRun, kind: str, where: float, bit: int
) -> None:
    """Every artifact is bound by run.json's manifest and by its own links: one flipped bit
    anywhere is a typed refusal, never a pass or a crash."""
    path = run.path(kind)
    pristine = path.read_bytes()
    data = bytearray(pristine)
    data[min(int(where * len(data)), len(data) - 1)] ^= 1 << bit
    path.write_bytes(bytes(data))
    try:
        with pytest.raises(KilnError):
            run.verify()
    finally:
        path.write_bytes(pristine)
