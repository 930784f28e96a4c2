"""The verify benchmark runs end to end at a tiny scale (numbers: docs/performance.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import verify_throughput
from kiln_verify.limits import MAX_OPENENV_DATASET_BYTES, MAX_OPENENV_REPLAY_BYTES
from kiln_verify.testing.bundles import build_fixture_bundle


def test_verify_throughput_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_throughput.main(["--scale", "0.004", "--rounds", "1", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert list(results) == ["max-small", "max-large", "dense-small", "dense-large"]
    for row in results.values():
        assert row["verify_s"] > 0
        assert row["sha256sum_s"] > 0
        assert row["peak_rss_mib"] > 0
    assert results["max-large"]["observation_pad"] > verify_throughput.PAD
    assert "rss_growth_mib" in results["dense-large"]


def test_max_shape_fills_both_caps(tmp_path: Path) -> None:
    """The target's shape: at the full group count, corpus and replay land at ``--fill``
    of their caps (sizes are linear in the padding, so the probe count extrapolates)."""
    pad, reasoning = verify_throughput.max_size_pads(tmp_path / "probe", 0.97)
    bundle = build_fixture_bundle(
        tmp_path / "bundle",
        groups=verify_throughput.PROBE_GROUPS,
        group_size=verify_throughput.GROUP_SIZE,
        pad=pad,
        reasoning=reasoning,
    )
    per_group = verify_throughput.GROUPS / verify_throughput.PROBE_GROUPS
    corpus = bundle.dataset.stat().st_size * per_group / MAX_OPENENV_DATASET_BYTES
    replay = bundle.replay.stat().st_size * per_group / MAX_OPENENV_REPLAY_BYTES
    assert 0.965 <= corpus <= 0.975
    assert 0.965 <= replay <= 0.975
