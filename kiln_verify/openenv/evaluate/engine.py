"""Paired held-out evaluation, start to finish (kiln-openenv-contract §9).

Live form (:func:`run_evaluation`): collect the baseline, then the candidate, with the
same :class:`~kiln_verify.openenv.collect.CollectionControls` except the output paths, into
``DIR/baseline/`` and ``DIR/candidate/`` (default file names), then evaluate the two
bundles and publish ``DIR/receipt.json``. Offline form (:func:`evaluate_bundles`): two
existing summaries. Either way each bundle is verified offline first
(:func:`~kiln_verify.openenv.verify.verify_bundle`), the pair is checked
(:mod:`.pairing`), the evidence computed (:mod:`.evidence`) and the receipt
``kiln.openenv-environment-evaluation.v1`` built; its bytes are pretty JSON + LF and a
pure function of the two summary files, the gate and the training interval.

A declared training interval ``[training.seed_start, +training.groups)`` that overlaps the
evaluation interval ``[seed_start, +groups)`` is a usage error, raised before any network
contact (live) or any file is read (offline).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kiln_verify.core.digest import canonical_digest
from kiln_verify.core.publisher import OUTPUT, check_targets, publish_files
from kiln_verify.errors import EvaluationPairingMismatch, LimitExceeded, UsageError
from kiln_verify.limits import MAX_OPENENV_REPLAY_BYTES, MAX_OPENENV_SUMMARY_BYTES
from kiln_verify.openenv.collect import (
    DEFAULT_DATASET,
    DEFAULT_REPLAY,
    DEFAULT_SUMMARY,
    CollectionControls,
    ProgressHook,
    run_collection,
)
from kiln_verify.openenv.evaluate.evidence import (
    MINIMUM_PAIRED_GROUPS,
    build_evidence,
    compare_groups,
    outcome_for,
)
from kiln_verify.openenv.evaluate.pairing import PairedBundle, check_pairing
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.records.evaluation import (
    EVALUATION_SCHEMA,
    EnvironmentEvalConfig,
    EnvironmentEvalGate,
    EnvironmentEvaluationReceipt,
    PolicyIdentity,
)
from kiln_verify.openenv.records.replay import read_replay
from kiln_verify.openenv.records.reports import VerificationReport
from kiln_verify.openenv.records.serialize import report_bytes, summary_file_sha256
from kiln_verify.openenv.records.summary import RolloutSummary, read_summary
from kiln_verify.openenv.verify import verify_bundle_digests

__all__ = [
    "BASELINE_DIR",
    "CANDIDATE_DIR",
    "RECEIPT_NAME",
    "Evaluation",
    "EvaluationLayout",
    "TrainingInterval",
    "build_receipt",
    "check_layout",
    "check_live_request",
    "check_training_overlap",
    "evaluate_bundles",
    "load_bundle",
    "policy_identity",
    "receipt_bytes",
    "run_evaluation",
    "write_receipt",
]

BASELINE_DIR: Final = "baseline"
CANDIDATE_DIR: Final = "candidate"
RECEIPT_NAME: Final = "receipt.json"


@dataclass(frozen=True, slots=True)
class TrainingInterval:
    """The declared training seeds ``[seed_start, seed_start + groups)``."""

    seed_start: int
    groups: int

    def overlaps(self, seed_start: int, groups: int) -> bool:
        return seed_start < self.seed_start + self.groups and self.seed_start < seed_start + groups

    @property
    def next_seed(self) -> int:
        """The default evaluation ``seed_start``: right after the training interval."""
        return self.seed_start + self.groups


def check_training_overlap(seed_start: int, groups: int, training: TrainingInterval | None) -> None:
    """Refuse (``usage``) evaluation seeds that overlap the declared training interval."""
    if training is None:
        return
    if training.seed_start < 0 or training.groups < 1:
        raise UsageError(
            "the training interval needs `training_seed_start` >= 0 and `training_groups` >= 1",
            fields=("training_seed_start", "training_groups"),
        )
    if training.overlaps(seed_start, groups):
        raise UsageError(
            f"evaluation seeds [{seed_start}, {seed_start + groups}) overlap the training "
            f"seeds [{training.seed_start}, {training.next_seed})",
            hint=f"evaluate on held-out seeds, e.g. `seed_start` {training.next_seed}",
            fields=("seed_start",),
        )


def check_live_request(
    controls: CollectionControls,
    gate: EnvironmentEvalGate | None,
    training: TrainingInterval | None,
) -> None:
    """The live form's request rules (no network): held-out seeds; a gate needs 20 groups."""
    check_training_overlap(controls.options.seed_start, controls.options.groups, training)
    if gate is not None and controls.options.groups < MINIMUM_PAIRED_GROUPS:
        raise UsageError(
            f"a gate needs at least {MINIMUM_PAIRED_GROUPS} groups (got {controls.options.groups})",
            hint="raise `groups` or drop the gate for a diagnostic run",
            fields=("groups",),
        )


@dataclass(frozen=True, slots=True)
class EvaluationLayout:
    """Where a live evaluation writes: two default-named bundles and the receipt."""

    root: Path

    def side(self, name: str) -> tuple[str, str, str]:
        """``(dataset, replay, summary)`` paths of ``baseline`` or ``candidate``."""
        folder = self.root / name
        return (
            os.fspath(folder / DEFAULT_DATASET),
            os.fspath(folder / DEFAULT_REPLAY),
            os.fspath(folder / DEFAULT_SUMMARY),
        )

    @property
    def receipt(self) -> str:
        return os.fspath(self.root / RECEIPT_NAME)

    def targets(self) -> list[str]:
        return [*self.side(BASELINE_DIR), *self.side(CANDIDATE_DIR), self.receipt]


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A finished evaluation: the receipt, its exact bytes and both verification reports."""

    receipt: EnvironmentEvaluationReceipt
    data: bytes
    baseline: VerificationReport
    candidate: VerificationReport
    receipt_path: str | None = None


def _read_capped(path: str, cap: int, limit: str) -> bytes:
    with Path(path).open("rb") as stream:
        data = stream.read(cap + 1)
    if len(data) > cap:
        raise LimitExceeded("file", limit=limit, bound=cap, observed=len(data), path=path)
    return data


def load_bundle(summary_path: str | os.PathLike[str]) -> tuple[PairedBundle, VerificationReport]:
    """Verify one bundle offline, then read back exactly the verified summary and replay."""
    shown = os.fspath(summary_path)
    verified = verify_bundle_digests(shown)
    report = verified.report
    data = _read_capped(shown, MAX_OPENENV_SUMMARY_BYTES, "MAX_OPENENV_SUMMARY_BYTES")
    if str(summary_file_sha256(data)) != verified.summary_sha256:
        # read again, the summary is other bytes than the ones verified (issue 14.6)
        raise EvaluationPairingMismatch(
            "the bundle changed while it was being evaluated", path=shown, location="bundle"
        )
    summary = read_summary(data, shown)
    replay_data = _read_capped(
        report.replay_path, MAX_OPENENV_REPLAY_BYTES, "MAX_OPENENV_REPLAY_BYTES"
    )
    if (
        summary.dataset_sha256 != report.dataset_sha256
        or summary.replay_sha256 != report.replay_sha256
        or str(summary_file_sha256(replay_data)) != summary.replay_sha256
    ):
        raise EvaluationPairingMismatch(
            "the bundle changed while it was being evaluated", path=shown, location="bundle"
        )
    replay = read_replay(replay_data, report.replay_path)
    paired = PairedBundle(summary, replay, str(summary_file_sha256(data)), shown)
    return paired, report


def policy_identity(summary: RolloutSummary) -> PolicyIdentity:
    """The receipt's ``PolicyIdentity`` of one side.

    ``adapter`` / ``adapter_content_revision``: the behaviour policy's adapter name and
    content digest (else the summary's ``adapter``; absent = base model);
    ``execution_provenance_sha256``: canonical digest of the summary's
    ``behavior_policy`` record (served model, base model digest, inference config,
    implementation); absent for legacy summaries without one.
    """
    policy = summary.behavior_policy
    if policy is None:
        return PolicyIdentity(adapter=summary.adapter or None)
    adapter = policy.adapter
    return PolicyIdentity(
        adapter=adapter.name if adapter is not None else (summary.adapter or None),
        adapter_content_revision=adapter.content_sha256 if adapter is not None else None,
        execution_provenance_sha256=str(canonical_digest(policy.to_json())),
    )


def build_receipt(
    baseline: PairedBundle,
    candidate: PairedBundle,
    *,
    gate: EnvironmentEvalGate | None = None,
    training: TrainingInterval | None = None,
    run_id: str | None = None,
) -> EnvironmentEvaluationReceipt:
    """Pairing checks, evidence, decision, outcome: the receipt of two verified bundles."""
    summary = baseline.summary
    check_training_overlap(summary.seed_start, summary.groups, training)
    check_pairing(baseline, candidate)
    comparison = compare_groups(baseline.replay, candidate.replay)
    evidence = build_evidence(comparison, gate)
    derived = training is not None and summary.seed_start == training.next_seed
    config = EnvironmentEvalConfig(
        groups=summary.groups,
        group_size=summary.group_size,
        seed_start=None if derived else summary.seed_start,
        gate=gate,
    )
    if run_id is None:
        digest = canonical_digest(
            {
                "baseline_summary_sha256": baseline.summary_sha256,
                "candidate_summary_sha256": candidate.summary_sha256,
                "config": config.to_json(),
            }
        )
        run_id = f"eval-{str(digest).removeprefix('sha256:')[:16]}"
    outcome = outcome_for(evidence.decision)
    return EnvironmentEvaluationReceipt(
        schema=EVALUATION_SCHEMA,
        run_id=run_id,
        config=config,
        seed_start=summary.seed_start,
        baseline=policy_identity(baseline.summary),
        candidate=policy_identity(candidate.summary),
        baseline_summary_sha256=baseline.summary_sha256,
        candidate_summary_sha256=candidate.summary_sha256,
        evidence=evidence,
        outcome=outcome,
        verdict=f"{outcome}: {evidence.reason}",
    )


def receipt_bytes(receipt: EnvironmentEvaluationReceipt) -> bytes:
    """The receipt file: pretty JSON + LF (deterministic)."""
    return report_bytes(receipt)


def write_receipt(path: str | os.PathLike[str], data: bytes, *, force: bool = False) -> None:
    """Publish the receipt atomically; an existing file is refused unless ``force``."""
    publish_files([(path, data)], force=force, wording=OUTPUT)


def evaluate_bundles(
    baseline_summary: str | os.PathLike[str],
    candidate_summary: str | os.PathLike[str],
    *,
    gate: EnvironmentEvalGate | None = None,
    training: TrainingInterval | None = None,
    run_id: str | None = None,
    receipt_path: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Evaluation:
    """Verify both bundles, check the pairing, compute (and optionally write) the receipt."""
    if receipt_path is not None:
        check_targets([receipt_path], force=force, wording=OUTPUT)
    base, base_report = load_bundle(baseline_summary)
    cand, cand_report = load_bundle(candidate_summary)
    receipt = build_receipt(base, cand, gate=gate, training=training, run_id=run_id)
    data = receipt_bytes(receipt)
    shown = None
    if receipt_path is not None:
        write_receipt(receipt_path, data, force=force)
        shown = os.fspath(receipt_path)
    return Evaluation(receipt, data, base_report, cand_report, shown)


def check_layout(output_dir: str | os.PathLike[str], *, force: bool) -> EvaluationLayout:
    """The live form's outputs pass publication's checks (the two side directories may
    still have to be created), before any policy runs or any server is contacted."""
    layout = EvaluationLayout(Path(output_dir))
    check_targets(layout.targets(), force=force, create_parents=True, wording=OUTPUT)
    return layout


async def run_evaluation(
    controls: CollectionControls,
    baseline_policy: Policy,
    candidate_policy: Policy,
    output_dir: str | os.PathLike[str],
    *,
    gate: EnvironmentEvalGate | None = None,
    training: TrainingInterval | None = None,
    run_id: str | None = None,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
) -> Evaluation:
    """Collect baseline then candidate with identical controls, then evaluate (§9).

    Both collections reach the environments the same way, ``controls.access(environ)``
    (:class:`~kiln_verify.openenv.protocol.access.EnvironmentAccess`: the controls'
    credential slots read from ``environ``, their capacity wait and concurrency).
    ``controls.force`` allows replacing existing bundle files and the receipt; without it
    any existing target is refused before any network contact. The policies are not
    closed here.
    """
    check_live_request(controls, gate, training)
    layout = check_layout(output_dir, force=controls.force)
    for name in (BASELINE_DIR, CANDIDATE_DIR):
        (layout.root / name).mkdir(parents=True, exist_ok=True)
    for name, policy in ((BASELINE_DIR, baseline_policy), (CANDIDATE_DIR, candidate_policy)):
        dataset, replay, summary = layout.side(name)
        side = dataclasses.replace(
            controls, output=dataset, replay_output=replay, summary_output=summary
        )
        await run_collection(side, policy, environ=environ, progress=progress)
    return evaluate_bundles(
        layout.side(BASELINE_DIR)[2],
        layout.side(CANDIDATE_DIR)[2],
        gate=gate,
        training=training,
        run_id=run_id,
        receipt_path=layout.receipt,
        force=controls.force,
    )
