"""Every report in a real browser (headless Chromium over the DevTools protocol).

A page must load with no console error (a Content-Security-Policy violation is one: it
would mean the page tried to load or run something), request nothing but itself, show the
key numbers as rendered text, keep peer-supplied markup inert, and paint something.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kiln_verify.report import engine
from kiln_verify.report.bundle_facts import gather
from kiln_verify.report.document import fmt
from kiln_verify.report.evaluation import load_evaluation
from kiln_verify.testing.bundles import FixtureBundle
from tests.browser import Chromium, PageVisit, ink_fraction

PROBES = {
    "active": "document.querySelectorAll('script,img,iframe,object,embed,link').length",
    "title": "document.title",
    "charts": "document.querySelectorAll('svg.chart rect.bar').length",
    "tables": "document.querySelectorAll('table').length",
}


def _visit(chromium: Chromium, data: bytes, path: Path) -> PageVisit:
    path.write_bytes(data)
    visit = chromium.visit(path, PROBES)
    assert visit.console_errors == []
    assert visit.requests == [visit.url]  # the page itself, nothing else
    assert visit.probes["active"] == 0
    assert "PWNED" not in str(visit.probes["title"])
    assert visit.probes["charts"] > 0
    assert ink_fraction(visit.screenshot) > 0.02  # not a blank page
    return visit


def test_bundle_report_in_a_browser(chromium: Any, bundle: FixtureBundle, tmp_path: Path) -> None:
    visit = _visit(chromium, engine.bundle_report(bundle.summary).data, tmp_path / "b.html")
    stats = gather(bundle.summary).summary.stats
    for number in (
        fmt(stats.mean_episode_return),
        fmt(stats.total_model_tokens),
        fmt(stats.mean_model_latency_ms),
    ):
        assert number in visit.text
    assert "Rollout bundle report" in visit.probes["title"]
    assert "ACTION_SCHEMA_VALIDATION_FAILED" in visit.text


def test_hostile_bundle_report_stays_inert(
    chromium: Any, hostile_bundle: FixtureBundle, tmp_path: Path
) -> None:
    visit = _visit(chromium, engine.bundle_report(hostile_bundle.summary).data, tmp_path / "h.html")
    assert "<script>document.title='PWNED'</script>" in visit.text  # shown as text


def test_conformance_report_in_a_browser(
    chromium: Any, conformance_file: Path, tmp_path: Path
) -> None:
    visit = _visit(chromium, engine.conformance_report(conformance_file).data, tmp_path / "c.html")
    assert "Not conforming" in visit.text
    assert "error.unknown-type" in visit.text
    assert "<script>document.title='PWNED'</script>" in visit.text


def test_evaluation_report_in_a_browser(
    chromium: Any, evaluation: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    receipt, base, cand = evaluation
    visit = _visit(
        chromium, engine.evaluation_report(receipt, base, cand).data, tmp_path / "e.html"
    )
    evidence = load_evaluation(receipt, base, cand).receipt.evidence
    assert fmt(evidence.exact_sign_test_p_value) in visit.text
    assert evidence.decision in visit.text
    assert visit.probes["charts"] == 20 + 3  # one bar per seed, and the direction tally


def test_the_checks_see_what_a_bad_page_does(chromium: Any, tmp_path: Path) -> None:
    """The harness is not blind: a page that loads an image and logs an error is caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><p>bad</p><img src="http://127.0.0.1:9/x.png">'
        '<script>console.error("boom")</script></body></html>'
    )
    visit = chromium.visit(page)
    assert "http://127.0.0.1:9/x.png" in visit.requests
    assert any("boom" in line for line in visit.console_errors)
