"""The stage's decisions on real oracle bandits: promoted and served, kept, rejected and never
served, inconclusive, and drift between the two halves failing the run."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.control.artifacts import open_verified
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.failures import classify
from kiln_verify.control.kinds.environment_eval import (
    EVALUATION_ARTIFACTS,
    EvaluationJob,
    EvaluationResult,
    evaluate_candidate,
)
from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.control.metrics import ControlMetrics, Gauges
from kiln_verify.control.resident.store import adapters_root, install_adapter
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control.training.evaluation_status import OpenEnvEnvironmentEvalStatus
from kiln_verify.control.training.records import OpenEnvEnvironmentEvalConfig
from kiln_verify.errors import (
    ApiArtifactIntegrityFailed,
    ApiEnvironmentEvalInvalid,
    EnvironmentIdentityChanged,
    EvaluationPairingMismatch,
)
from kiln_verify.openenv.evaluate import receipt_bytes
from kiln_verify.openenv.policy.base import Policy
from oracle.runner import ServerHandle
from tests.control.environment_eval.conftest import job_for, train_request
from tests.openenv.collect.options import make_controls
from tests.openenv.evaluate.conftest import best, worst
from tests.openenv.records.kiln_published import KILN, differences

GATE = {"groups": 20, "seed_start": 1000, "gate": {"min_mean_improvement": 0.0}}


class Recorder:
    """The stage's observers: every section it reported, and whether promotion ran."""

    def __init__(self, promote: Any = None) -> None:
        self.sections: list[OpenEnvEnvironmentEvalStatus] = []
        self.promoted = 0
        self._promote = promote
        self.metrics = ControlMetrics(lambda: Gauges(0, 0, 0))

    def promote(self) -> None:
        self.promoted += 1
        if self._promote is not None:
            self._promote()

    def run(self, job: EvaluationJob, baseline: Policy, candidate: Policy) -> EvaluationResult:
        result = asyncio.run(
            evaluate_candidate(
                job,
                baseline,
                candidate,
                promote=self.promote,
                update=self.sections.append,
                metrics=self.metrics,
            )
        )
        # every section the stage reported, and its last, is Kiln's closed record
        for section in [*self.sections, result.section]:
            assert differences("OpenEnvEnvironmentEvalStatus", section.to_json()) == []
        return result

    @property
    def states(self) -> list[str]:
        states: list[str] = []
        for section in self.sections:
            if not states or states[-1] != section.state:
                states.append(section.state)
        return states


def _files(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())


def test_a_better_candidate_is_promoted_then_served(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle],
    resident: ServerConfig,
    completed: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    from kiln_verify.control.resident.serving import served_policy, serves

    run_dir = tmp_path / "run"
    job = job_for(run_dir, bandits[0].base_url, GATE)
    assert not serves(resident, "arm-v1")
    seen = Recorder(lambda: install_adapter(resident, bundle=completed[1], name="arm-v1"))
    result = seen.run(job, worst(), best())

    evidence = result.receipt.evidence
    assert (evidence.decision, result.outcome) == ("passed", "promoted"), repr(result.error)
    assert evidence.regressed_groups == 0
    assert evidence.improved_groups >= 15
    assert seen.promoted == 1
    assert seen.states == ["pending", "collecting_baseline", "collecting_candidate", "completed"]
    # promoted means servable: the resident model now plays it
    assert serves(resident, "arm-v1")
    policy = asyncio.run(served_policy(resident, "arm-v1"))
    assert policy is not None
    adapter = policy.identity().adapter
    assert adapter is not None
    assert adapter["name"] == "arm-v1"

    # the layout is the layout table's, and the manifest binds exactly those files
    assert _files(run_dir) == sorted(ARTIFACT_PATHS[k] for k in EVALUATION_ARTIFACTS)
    assert [a.kind for a in result.artifacts] == list(EVALUATION_ARTIFACTS)
    for entry in result.artifacts:
        data = (run_dir / ARTIFACT_PATHS[entry.kind]).read_bytes()
        assert entry.sha256 == "sha256:" + hashlib.sha256(data).hexdigest()
        assert entry.bytes == len(data)
        assert entry.url == f"/v1/openenv/runs/run-eval-1/artifacts/{entry.kind}"
    receipt = (run_dir / ARTIFACT_PATHS["environment_eval_receipt"]).read_bytes()
    assert receipt == receipt_bytes(result.receipt)
    body = json.loads(receipt)
    assert (body["outcome"], body["run_id"], body["seed_start"]) == ("promoted", "run-eval-1", 1000)

    # the status section: Kiln's closed record with every field set, the final identities
    section = result.section.to_json()
    assert differences("OpenEnvEnvironmentEvalStatus", section) == []
    assert set(section) == KILN["OpenEnvEnvironmentEvalStatus"].allowed
    assert section["progress"] == {
        "state": "completed",
        "groups_completed": 20,
        "groups_total": 20,
        "rollouts_completed": 20,
        "rollouts_total": 20,
    }
    assert section["candidate"] == body["candidate"]
    assert OpenEnvEnvironmentEvalStatus.model_validate(section) == result.section
    assert seen.metrics.evaluations == {"started": 1, "completed": 1, "failed": 0}
    assert seen.metrics.gates == {"passed": 1, "rejected": 0, "inconclusive": 0}

    # the artifact route opens a nested artifact; a symlinked folder is never followed
    status = OpenEnvRunStatus.model_validate(
        {
            "run_id": "run-eval-1",
            "kind": "rollout",
            "state": "rollout_ready",
            "request": {"environment_urls": [bandits[0].base_url]},
            "submitted_unix_ms": 1,
            "admission": {"max_active_runs": 1, "sequence": 1},
            "progress": {
                "groups_completed": 1,
                "groups_total": 1,
                "rollouts_completed": 1,
                "rollouts_total": 1,
            },
            "artifacts": [a.to_json() for a in result.artifacts],
        }
    )
    fd, entry = open_verified(
        status, run_dir, "environment_eval_baseline_summary", EVALUATION_ARTIFACTS
    )
    os.close(fd)
    side = run_dir / "environment-evaluation" / "baseline"
    side.rename(run_dir / "moved")
    side.symlink_to(run_dir / "moved")
    with pytest.raises(ApiArtifactIntegrityFailed):
        open_verified(status, run_dir, "environment_eval_baseline_summary", EVALUATION_ARTIFACTS)


def test_a_passed_candidate_without_auto_load_is_kept_not_served(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle], tmp_path: Path
) -> None:
    job = job_for(tmp_path / "run", bandits[0].base_url, GATE, auto_load=False)
    seen = Recorder()
    result = seen.run(job, worst(), best())
    assert (result.receipt.evidence.decision, result.outcome) == ("passed", "kept")
    assert seen.promoted == 0


def test_a_worse_candidate_is_rejected_and_never_served(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle], resident: ServerConfig, tmp_path: Path
) -> None:
    job = job_for(tmp_path / "run", bandits[0].base_url, GATE, output_adapter="worse-v1")
    seen = Recorder()
    result = seen.run(job, best(), worst())
    evidence = result.receipt.evidence
    assert (evidence.decision, result.outcome) == ("rejected", "rejected")
    assert evidence.regressed_groups >= 15
    assert seen.promoted == 0
    assert not (adapters_root(resident) / "worse-v1").exists()
    assert seen.metrics.gates["rejected"] == 1
    assert result.section.state == "completed"
    assert result.section.outcome == "rejected"


def test_fewer_than_20_groups_is_refused_at_admission_and_inconclusive_in_the_stage(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle], tmp_path: Path
) -> None:
    url = bandits[0].base_url
    small = {"groups": 19, "seed_start": 1000, "gate": {"min_mean_improvement": 0.0}}
    with pytest.raises(ApiEnvironmentEvalInvalid):
        job_for(tmp_path / "refused", url, small)
    # past admission (a request the engine still meets, e.g. a Kiln-written run): rule 2
    request = train_request(url, None)
    controls = make_controls(
        [url],
        groups=4,
        seed_start=980,
        max_steps=1,
        thinking=False,
        capacity_wait_seconds=10,
        temperature=0.0,
        concurrency=1,
        max_recoverable_errors=0,
        group_size=1,
    )
    (tmp_path / "run").mkdir()
    config = OpenEnvEnvironmentEvalConfig.model_validate({**small, "groups": 5})
    job = EvaluationJob.create("run-eval-1", tmp_path / "run", request, controls, config)
    seen = Recorder()
    result = seen.run(job, worst(), best())
    evidence = result.receipt.evidence
    assert (evidence.decision, result.outcome) == ("inconclusive", "inconclusive")
    assert evidence.paired_groups == 5
    assert "fewer than the 20" in evidence.reason
    assert seen.promoted == 0
    assert seen.metrics.gates["inconclusive"] == 1


def test_drift_between_baseline_and_candidate_fails_the_run(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    job = job_for(run_dir, bandits[1].base_url, GATE)
    seen = Recorder()
    with pytest.raises(EvaluationPairingMismatch) as caught:
        seen.run(job, best(), best())
    assert "reset observation" in caught.value.rule
    failure = classify(caught.value, "environment_evaluation", 0)
    assert (failure.code, failure.stage, failure.retryable) == (
        "environment_evaluation_failed",
        "environment_evaluation",
        True,
    )
    assert seen.sections[-1].state == "failed"
    assert seen.promoted == 0
    assert not (run_dir / ARTIFACT_PATHS["environment_eval_receipt"]).exists()
    assert seen.metrics.evaluations == {"started": 1, "completed": 0, "failed": 1}


def test_an_identity_that_changes_after_the_baseline_fails_the_run(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    job = job_for(run_dir, bandits[2].base_url, GATE)
    seen = Recorder()
    with pytest.raises(EnvironmentIdentityChanged) as caught:
        seen.run(job, worst(), best())
    failure = classify(caught.value, "environment_evaluation", 0)
    assert (failure.code, failure.stage) == (
        "environment_identity_changed",
        "environment_evaluation",
    )
    assert seen.states[-2:] == ["collecting_candidate", "failed"]
    assert (run_dir / ARTIFACT_PATHS["environment_eval_baseline_summary"]).is_file()
    assert not (run_dir / ARTIFACT_PATHS["environment_eval_candidate_summary"]).exists()
    assert seen.promoted == 0


def test_a_cancelled_evaluation_stops_before_the_candidate_and_promotes_nothing(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    job = job_for(run_dir, bandits[0].base_url, GATE)
    seen = Recorder()

    def cancelled() -> bool:  # the run is asked to stop once the baseline is published
        return seen.sections[-1].baseline_stats is not None

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(
            evaluate_candidate(
                job,
                worst(),
                best(),
                promote=seen.promote,
                update=seen.sections.append,
                metrics=seen.metrics,
                cancel_requested=cancelled,
            )
        )
    assert seen.states == ["pending", "collecting_baseline", "cancelled"]
    assert seen.promoted == 0
    assert not (run_dir / ARTIFACT_PATHS["environment_eval_candidate_summary"]).exists()
    assert seen.metrics.evaluations == {"started": 1, "completed": 0, "failed": 1}


def test_the_train_kind_serves_the_seven_evaluation_artifacts_at_the_layout_paths() -> None:
    from kiln_verify.control.kinds.train import TRAIN_ARTIFACTS

    assert list(TRAIN_ARTIFACTS) == list(ARTIFACT_PATHS)  # every kind, in manifest order
    for kind, file in EVALUATION_ARTIFACTS.items():
        assert TRAIN_ARTIFACTS[kind] == file
        assert file.name == ARTIFACT_PATHS[kind]
    # the bundle halves keep the collector's own file names and caps
    assert [
        Path(EVALUATION_ARTIFACTS[f"environment_eval_baseline_{k}"].name).name
        for k in ("dataset", "replay", "summary")
    ] == [TRAIN_ARTIFACTS[k].name for k in ("dataset", "replay", "summary")]
