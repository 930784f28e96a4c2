"""The report benchmark runs end to end at a tiny scale (numbers: docs/performance.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks import report_generation


def test_report_generation_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    assert report_generation.main(["--scale", "0.004", "--rounds", "1", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert list(results) == ["max", "dense"]
    for row in results.values():
        assert row["verify_s"] > 0
        assert row["report_s"] > 0
        assert row["ratio"] > 0
        assert row["report_bytes"] > 0
