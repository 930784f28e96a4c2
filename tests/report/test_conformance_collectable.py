"""The `collectable` verdict: its rule, the reader's check of it, its page, and v1 reports.

The rule is a pure function of the verdicts of two cases, so every combination is listed.
The reader recomputes it and refuses a file that disagrees; a v1 report (written before the
verdict existed) is still read and rendered, saying so.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import EpisodeIdIgnored, ResetNondeterministic
from kiln_verify.report import engine
from kiln_verify.report.collectable import (
    COLLECTABLE_CASES,
    collectable_label,
    collectable_verdicts,
)
from kiln_verify.report.conformance_input import read_conformance_report
from pytest_kiln.cases import CASES_BY_ID
from tests.report.conftest import (
    assert_conformance_refused,
    conformance_document,
    write_conformance,
)
from tests.report.pages import elements

FRESH, ECHO = COLLECTABLE_CASES
VERDICTS = ("OK", "NON-STRICT", "FAILED", "INFORMATIONAL", "SKIPPED", None)


def test_the_cases_are_the_ones_the_refusals_name() -> None:
    assert (
        ResetNondeterministic.conformance_case,
        EpisodeIdIgnored.conformance_case,
    ) == (FRESH, ECHO)
    assert FRESH in CASES_BY_ID
    assert ECHO in CASES_BY_ID


@pytest.mark.parametrize(("fresh", "echo"), list(itertools.product(VERDICTS, VERDICTS)))
def test_every_combination_of_the_two_cases(fresh: str | None, echo: str | None) -> None:
    results = [("e", "health.status-200", "FAILED")]  # other cases never count
    results += [("e", case, v) for case, v in ((FRESH, fresh), (ECHO, echo)) if v is not None]
    found = collectable_verdicts(results)
    if fresh is None and echo is None:
        assert found == []  # neither case ran: no entry (the control-plane suite)
        assert collectable_label(None) == "-"
        return
    (entry,) = found
    assert [(c.case, c.verdict) for c in entry.cases] == [
        (case, v) for case, v in ((FRESH, fresh), (ECHO, echo)) if v is not None
    ]
    expected = {"OK": True, None: None, "SKIPPED": None}.get(fresh, False)
    assert entry.collectable is expected
    assert collectable_label(entry) == {True: "yes", False: "no", None: "undetermined"}[expected]
    assert entry.requested_episode_id == (
        "kept" if echo == "OK" else "untested" if echo in (None, "SKIPPED") else "ignored"
    )
    if expected is False:
        assert "--no-state-check" in entry.reason
        assert "reset_nondeterministic" in entry.reason
    if expected and entry.requested_episode_id == "ignored":
        assert "leave episode_id out of the reset options" in entry.reason


def test_entries_are_per_endpoint_in_id_order() -> None:
    found = collectable_verdicts(
        [("b", FRESH, "OK"), ("a", ECHO, "OK"), ("a", FRESH, "NON-STRICT"), ("c", "x", "OK")]
    )
    assert [(e.endpoint, e.collectable) for e in found] == [("a", False), ("b", True)]


def _alpha(document: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = document["collectable"][0]
    return entry


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (lambda d: d.pop("collectable"), "collectable is missing"),
        (lambda d: _alpha(d).update(collectable=False), "collectable is not what the results"),
        (lambda d: _alpha(d).update(reason="trust me"), "collectable is not what the results"),
        (lambda d: d["collectable"].pop(), "collectable is not what the results"),
        (lambda d: _alpha(d).update(requested_episode_id="maybe"), "requested_episode_id"),
        (lambda d: _alpha(d).update(cases=[]), "cases"),
        (lambda d: _alpha(d).update(extra=1), "Extra inputs"),
        (lambda d: d.update(collectable=None), "must be omitted rather than null"),
        (lambda d: d.update(format="kiln.conformance-report.v1"), "not part of kiln.conformance"),
    ],
)
def test_the_reader_refuses_a_verdict_its_results_do_not_give(
    tmp_path: Path, change: Any, rule: str
) -> None:
    assert_conformance_refused(tmp_path, change, rule)


def test_the_page_shows_the_verdict_its_cases_and_why(conformance_file: Path) -> None:
    page = engine.conformance_report(conformance_file).data.decode()
    text = " ".join(elements(page).text)
    assert "Collectable per endpoint" in text
    assert f"rests on {FRESH} and {ECHO}" in text
    assert "undetermined" in text
    assert "requested episode_id" in text
    assert "a requested episode_id is kept" in text


def test_a_v1_report_is_read_and_says_it_predates_the_verdict(tmp_path: Path) -> None:
    document = conformance_document()
    del document["collectable"]
    document["format"] = "kiln.conformance-report.v1"
    path = write_conformance(tmp_path / "v1.json", document)
    assert read_conformance_report(path).collectable is None
    text = " ".join(elements(engine.conformance_report(path).data.decode()).text)
    assert "written before the collectable verdict existed" in text
    assert "Collectable per endpoint" not in text
