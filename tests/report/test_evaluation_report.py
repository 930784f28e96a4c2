"""The evaluation report: re-derived from its two verified bundles, seed by seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.report import engine
from kiln_verify.report.document import fmt
from kiln_verify.report.evaluation import load_evaluation
from tests.report.pages import chart_tables, elements


def test_per_seed_differences_counts_and_decision(evaluation: tuple[Path, Path, Path]) -> None:
    receipt, base, cand = evaluation
    facts = load_evaluation(receipt, base, cand)
    evidence = facts.receipt.evidence
    assert len(facts.pairs) == evidence.paired_groups == 20
    directions = [pair.direction for pair in facts.pairs]
    assert directions.count("improved") == evidence.improved_groups
    assert directions.count("regressed") == evidence.regressed_groups
    assert directions.count("tied") == evidence.tied_groups
    page = engine.evaluation_report(receipt, base, cand).data.decode()
    text = " ".join(elements(page).text)
    for pair in facts.pairs:
        assert fmt(pair.difference) in text
    assert fmt(evidence.exact_sign_test_p_value) in text
    assert evidence.reason in text
    assert "min mean improvement" in text
    charts = chart_tables(page)
    per_seed = charts[0]
    assert len(per_seed[1]) == 20  # one bar per seed, each also in the chart's table
    for title in per_seed[1]:
        seed, _, value = title.rpartition(": ")
        assert seed in per_seed[2]
        assert value in per_seed[2]


def test_a_receipt_that_does_not_match_its_bundles_is_refused(
    evaluation: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    receipt, base, cand = evaluation
    with pytest.raises(KilnError) as swapped:
        load_evaluation(receipt, cand, base)
    assert swapped.value.code == "evaluation_pairing_mismatch"
    document = json.loads(receipt.read_text())
    document["evidence"]["improved_groups"] += 1
    document["evidence"]["tied_groups"] -= 1
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(document))
    with pytest.raises(KilnError) as failure:
        load_evaluation(forged, base, cand)
    assert failure.value.code == "evaluation_pairing_mismatch"
    assert failure.value.to_dict()["location"] == "evidence"


def test_same_inputs_same_bytes(evaluation: tuple[Path, Path, Path]) -> None:
    receipt, base, cand = evaluation
    assert (
        engine.evaluation_report(receipt, base, cand).data
        == engine.evaluation_report(receipt, base, cand).data
    )
