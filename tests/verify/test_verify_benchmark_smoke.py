"""The verify benchmark runs end to end at a tiny scale (numbers: docs/performance.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks import verify_throughput


def test_verify_throughput_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_throughput.main(["--scale", "0.004", "--rounds", "1", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    for label in ("small", "large"):
        row = results[label]
        assert row["verify_s"] > 0
        assert row["sha256sum_s"] > 0
        assert row["peak_rss_mib"] > 0
