"""Inputs for the report tests: small verified bundles, a conformance report, an evaluation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.openenv.evaluate import evaluate_bundles
from kiln_verify.openenv.records.evaluation import EnvironmentEvalGate
from kiln_verify.report.conformance_input import read_conformance_report
from kiln_verify.testing.bundles import FixtureBundle, build_fixture_bundle
from tests.browser import launch_or_skip

HOSTILE = (
    "<script>document.title='PWNED'</script>"
    '<img src="http://127.0.0.1:9/x.png" onerror="document.title=\'PWNED\'">'
    "[link](javascript:alert(1)) | `tick` **bold** & <b>"
)
"""Markup, script and Markdown payloads, put where peers' text reaches a report."""


def conformance_document() -> dict[str, Any]:
    """A fixed ``kiln-verify.conformance-report.v2`` report: two endpoints, every verdict,
    alpha collectable (both cases behind it OK), beta undetermined (its determinism case
    skipped)."""

    def row(
        endpoint: str, case: str, level: str, verdict: str, detail: str, **extra: Any
    ) -> dict[str, Any]:
        item = {
            "endpoint": endpoint,
            "url": f"http://127.0.0.1:{9001 if endpoint == 'alpha' else 9002}",
            "case": case,
            "level": level,
            "clause": "docs/openenv-protocol.md §2.4",
            "verdict": verdict,
            "detail": detail,
            "duration_s": 0.0125,
        }
        item.update(extra)
        return item

    results = [
        row("alpha", "error.invalid-json", "MUST", "OK", "INVALID_JSON, session open"),
        row("alpha", "error.unknown-type", "MUST", "FAILED", f"got EXECUTION_ERROR {HOSTILE}"),
        row("alpha", "ws.reset-again", "SHOULD", "NON-STRICT", "second reset kept the episode"),
        row("beta", "error.invalid-json", "MUST", "OK", "INVALID_JSON, session open"),
        row("beta", "error.unknown-type", "MUST", "OK", "UNKNOWN_TYPE, session open"),
        row("beta", "ws.reset-again", "SHOULD", "SKIPPED", "no schema-valid action"),
        row(
            "beta",
            "ws.step-before-reset",
            "MAY",
            "INFORMATIONAL",
            "answered nothing in 5 s",
            measurements={"capacity_retries": 2},
        ),
        row("alpha", "determinism.fresh-session-same-seed", "SHOULD", "OK", ""),
        row("alpha", "ws.episode-id-echo", "MAY", "OK", ""),
        row("beta", "determinism.fresh-session-same-seed", "SHOULD", "SKIPPED", "no session"),
    ]
    summary = {"OK": 5, "NON-STRICT": 1, "FAILED": 1, "INFORMATIONAL": 1, "SKIPPED": 2}
    return {
        "format": "kiln-verify.conformance-report.v2",
        "tool": {"name": "kiln-verify", "version": "0.1.0"},
        "python": "3.11.7",
        "platform": "Linux-test",
        "created_utc": "2026-01-01T00:00:00Z",
        "endpoints": [
            {"id": "alpha", "url": "http://127.0.0.1:9001"},
            {"id": "beta", "url": "http://127.0.0.1:9002"},
        ],
        "results": results,
        "summary": summary,
        "summary_line": (
            "kiln conformance: 5 OK, 1 NON-STRICT, 1 FAILED, 1 INFORMATIONAL, 2 SKIPPED"
        ),
        "conforming": False,
        "collectable": [
            {
                "endpoint": "alpha",
                "collectable": True,
                "requested_episode_id": "kept",
                "cases": [
                    {"case": "determinism.fresh-session-same-seed", "verdict": "OK"},
                    {"case": "ws.episode-id-echo", "verdict": "OK"},
                ],
                "reason": (
                    "reset(seed) reproduced the observation and the hidden state on two fresh "
                    "sessions; a requested episode_id is kept"
                ),
            },
            {
                "endpoint": "beta",
                "collectable": None,
                "requested_episode_id": "untested",
                "cases": [{"case": "determinism.fresh-session-same-seed", "verdict": "SKIPPED"}],
                "reason": (
                    "undetermined: determinism.fresh-session-same-seed could not be probed "
                    "(its detail says why)"
                ),
            },
        ],
    }


def write_conformance(path: Path, document: dict[str, Any] | None = None) -> Path:
    path.write_text(json.dumps(document or conformance_document(), indent=2) + "\n")
    return path


def assert_conformance_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], rule: str
) -> None:
    """The reader refuses ``conformance_document()`` after ``change`` with
    ``record_invalid``, its message matching ``rule``."""
    document = conformance_document()
    change(document)
    path = write_conformance(tmp_path / "bad.json", document)
    with pytest.raises(KilnError, match=rule) as failure:
        read_conformance_report(path)
    assert failure.value.code == "record_invalid"


@pytest.fixture
def bundle(tmp_path: Path) -> FixtureBundle:
    return build_fixture_bundle(tmp_path / "bundle", groups=10, group_size=3)


@pytest.fixture
def hostile_bundle(tmp_path: Path) -> FixtureBundle:
    return build_fixture_bundle(tmp_path / "hostile", groups=5, group_size=2, label=HOSTILE)


@pytest.fixture
def conformance_file(tmp_path: Path) -> Path:
    return write_conformance(tmp_path / "conformance.json")


@pytest.fixture
def evaluation(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(receipt, baseline summary, candidate summary): 20 paired groups under a gate."""
    root = tmp_path / "eval"
    base = build_fixture_bundle(root / "baseline", groups=20, group_size=2)
    cand = build_fixture_bundle(root / "candidate", groups=20, group_size=2, script_offset=1)
    receipt = root / "receipt.json"
    evaluate_bundles(
        base.summary,
        cand.summary,
        gate=EnvironmentEvalGate(min_mean_improvement=0.0),
        receipt_path=receipt,
    )
    return receipt, base.summary, cand.summary


@pytest.fixture(scope="session")
def chromium() -> Any:
    """A headless Chromium for the session (skipped with the reason where there is none,
    a failure instead under ``KILN_REQUIRE_BROWSER=1``: :func:`tests.browser.launch_or_skip`)."""
    browser = launch_or_skip()
    try:
        yield browser
    finally:
        browser.close()
