"""The evaluation report: a paired held-out evaluation, seed by seed, and its gate decision.

Inputs are an evaluation receipt and its two summaries. Both bundles are verified offline
and paired by the evaluation engine's own code (``load_bundle``, ``check_pairing``), the
receipt must name exactly these two summaries by digest, and its evidence must be what
the engine derives from them under the receipt's own gate: a receipt that does not match
its bundles is refused (``evaluation_pairing_mismatch``) rather than drawn. The per-seed
differences and their directions come from the engine's ``paired_groups``, the function
its improved / regressed / tied counts are made from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import EvaluationPairingMismatch
from kiln_verify.limits import REPORT_MAX_RECEIPT_BYTES
from kiln_verify.openenv.evaluate.engine import load_bundle
from kiln_verify.openenv.evaluate.evidence import (
    MINIMUM_PAIRED_GROUPS,
    PairedGroup,
    build_evidence,
    compare_groups,
    paired_groups,
)
from kiln_verify.openenv.evaluate.pairing import check_pairing
from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt, PolicyIdentity
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.openenv.verify.files import read_bounded
from kiln_verify.records import validate_record
from kiln_verify.report.document import (
    Bar,
    Cell,
    Chart,
    Document,
    KeyValues,
    Metric,
    Notice,
    Paragraph,
    Section,
    Table,
    Tone,
    fmt,
)

__all__ = ["EvaluationFacts", "evaluation_document", "load_evaluation"]

_DECISION_TONE: dict[str, Tone] = {
    "passed": "good",
    "rejected": "bad",
    "inconclusive": "warn",
    "diagnostic": "plain",
}
_DIRECTION_TONE: dict[str, Tone] = {"improved": "good", "regressed": "bad", "tied": "muted"}


@dataclass(frozen=True, slots=True)
class EvaluationFacts:
    receipt: EnvironmentEvaluationReceipt
    baseline: RolloutSummary
    candidate: RolloutSummary
    pairs: tuple[PairedGroup, ...]


def load_evaluation(
    receipt_path: str | os.PathLike[str],
    baseline_summary: str | os.PathLike[str],
    candidate_summary: str | os.PathLike[str],
) -> EvaluationFacts:
    """Verify both bundles and check the receipt against them (see the module text)."""
    shown = os.fspath(receipt_path)
    data = read_bounded(
        Path(receipt_path), max_bytes=REPORT_MAX_RECEIPT_BYTES, limit="REPORT_MAX_RECEIPT_BYTES"
    )
    value = loads_object(data, max_bytes=REPORT_MAX_RECEIPT_BYTES, source=shown)
    receipt = validate_record(EnvironmentEvaluationReceipt, value, source=shown)
    base, _ = load_bundle(baseline_summary)
    cand, _ = load_bundle(candidate_summary)

    def mismatch(rule: str, where: str) -> EvaluationPairingMismatch:
        return EvaluationPairingMismatch(rule, path=shown, location=where)

    if receipt.baseline_summary_sha256 != base.summary_sha256:
        raise mismatch("the receipt names another baseline summary", "baseline_summary_sha256")
    if receipt.candidate_summary_sha256 != cand.summary_sha256:
        raise mismatch("the receipt names another candidate summary", "candidate_summary_sha256")
    check_pairing(base, cand)
    evidence = build_evidence(compare_groups(base.replay, cand.replay), receipt.config.gate)
    if dumps_canonical(evidence.to_json()) != dumps_canonical(receipt.evidence.to_json()):
        raise mismatch("the receipt's evidence is not what its two bundles give", "evidence")
    if (receipt.config.groups, receipt.config.group_size, receipt.seed_start) != (
        base.summary.groups,
        base.summary.group_size,
        base.summary.seed_start,
    ):
        raise mismatch("the receipt's groups, group size or seed start differ", "config")
    pairs = tuple(paired_groups(base.replay, cand.replay))
    return EvaluationFacts(receipt, base.summary, cand.summary, pairs)


def _side(name: str, policy: PolicyIdentity, digest: str, mean: float) -> tuple[str, Cell]:
    adapter = policy.adapter or "base model"
    return (name, Cell(f"{adapter}; mean return {fmt(mean)}; summary {digest}"))


def _decision(facts: EvaluationFacts) -> Section:
    receipt = facts.receipt
    evidence, gate = receipt.evidence, receipt.config.gate
    tone = _DECISION_TONE[evidence.decision]
    items: list[tuple[str, Cell]] = [
        ("decision", Cell(evidence.decision, tone)),
        ("outcome", Cell(receipt.outcome, tone)),
        ("reason", Cell(evidence.reason)),
        ("policy", Cell(evidence.policy_version)),
        ("gate", Cell("set" if gate is not None else "none (diagnostic only)")),
        ("min mean improvement", Cell.num(gate.min_mean_improvement if gate else None)),
        ("min mean return", Cell.num(gate.min_mean_return if gate else None)),
        ("minimum paired groups", Cell.num(MINIMUM_PAIRED_GROUPS)),
        ("sign test alpha", Cell.num(evidence.exact_sign_test_alpha)),
        ("exact sign test p-value", Cell.num(evidence.exact_sign_test_p_value)),
        ("mean return improvement", Cell.num(evidence.mean_return_improvement)),
        (
            "improved / regressed / tied groups",
            Cell(
                f"{evidence.improved_groups} / {evidence.regressed_groups} / {evidence.tied_groups}"
            ),
        ),
        _side(
            "baseline",
            receipt.baseline,
            receipt.baseline_summary_sha256,
            evidence.baseline_mean_return,
        ),
        _side(
            "candidate",
            receipt.candidate,
            receipt.candidate_summary_sha256,
            evidence.candidate_mean_return,
        ),
    ]
    rules = Paragraph(
        "Rules, first match wins: no gate gives diagnostic; fewer than "
        f"{MINIMUM_PAIRED_GROUPS} paired groups inconclusive; significantly more regressed than "
        "improved groups (p below alpha) rejected; a candidate mean below min mean return "
        "rejected; an improvement below min mean improvement rejected; significantly more "
        "improved than regressed groups passed; otherwise inconclusive."
    )
    notice = Notice(f"{receipt.verdict}", tone if tone != "plain" else "warn")
    return Section(
        "Gate decision",
        (notice, KeyValues("Decision and thresholds", tuple(items)), rules),
        "decision",
    )


def _differences(facts: EvaluationFacts) -> Section:
    pairs = facts.pairs
    chart = Chart(
        "Candidate minus baseline group mean return, by seed",
        "seed",
        "difference",
        tuple(Bar(str(p.seed), p.difference, _DIRECTION_TONE[p.direction]) for p in pairs),
        signed=True,
    )
    names = [e.identity.metadata.name for e in facts.baseline.environments]
    rows = tuple(
        (
            Cell.num(p.group_index),
            Cell.num(p.seed),
            Cell(names[p.environment_index]),
            Cell.num(p.baseline_mean),
            Cell.num(p.candidate_mean),
            Cell.num(p.difference, _DIRECTION_TONE[p.direction]),
            Cell(p.direction, _DIRECTION_TONE[p.direction]),
        )
        for p in pairs
    )
    table = Table(
        "Per-seed paired group means",
        (
            "group",
            "seed",
            "environment",
            "baseline mean",
            "candidate mean",
            "difference",
            "direction",
        ),
        rows,
    )
    counts = facts.receipt.evidence
    tally = Chart(
        "Groups by direction",
        "direction",
        "groups",
        (
            Bar("improved", float(counts.improved_groups), "good"),
            Bar("regressed", float(counts.regressed_groups), "bad"),
            Bar("tied", float(counts.tied_groups), "muted"),
        ),
    )
    return Section("Paired differences", (chart, table, tally), "differences")


def evaluation_document(facts: EvaluationFacts) -> Document:
    receipt, evidence = facts.receipt, facts.receipt.evidence
    tone = _DECISION_TONE[evidence.decision]
    metrics = (
        Metric("decision", evidence.decision, tone),
        Metric("paired groups", fmt(evidence.paired_groups)),
        Metric(
            "improved",
            fmt(evidence.improved_groups),
            "good" if evidence.improved_groups else "plain",
        ),
        Metric(
            "regressed",
            fmt(evidence.regressed_groups),
            "bad" if evidence.regressed_groups else "plain",
        ),
        Metric("tied", fmt(evidence.tied_groups)),
        Metric("sign test p", fmt(evidence.exact_sign_test_p_value)),
        Metric("mean improvement", fmt(evidence.mean_return_improvement)),
    )
    return Document(
        kind="evaluation",
        title="Paired evaluation report",
        subtitle=f"{receipt.run_id} \u00b7 seeds {receipt.seed_start} to "
        f"{receipt.seed_start + receipt.config.groups - 1} \u00b7 {receipt.config.group_size} "
        "episodes per seed and side",
        metrics=metrics,
        sections=(_decision(facts), _differences(facts)),
    )
