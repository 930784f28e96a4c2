"""Chart geometry and histogram bins: exact edges, any finite value, stable coordinates."""

from __future__ import annotations

import sys

import pytest

from kiln_verify.report.charts import histogram, layout
from kiln_verify.report.document import Bar, Chart, fmt


def test_histogram_bins_cover_min_to_max() -> None:
    bins = histogram([0.0, 0.5, 1.0, 1.0, 0.25], 4)
    assert [(lo, hi) for lo, hi, _ in bins] == [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
    assert [count for _, _, count in bins] == [1, 1, 1, 2]  # the last bin includes max
    assert histogram([3.0, 3.0], 10) == [(3.0, 3.0, 2)]
    assert histogram([], 10) == []


def test_extreme_values_never_overflow() -> None:
    big = sys.float_info.max
    bins = histogram([-big, 0.0, big], 2)
    assert [count for _, _, count in bins] == [1, 2]
    assert bins[0][0] == -big
    assert bins[-1][1] == big
    geometry = layout(Chart("c", "x", "y", (Bar("a", big), Bar("b", -big)), signed=True))
    for bar in geometry.bars:
        assert 0 <= bar.y <= geometry.height
        assert 0 <= bar.height <= geometry.height


def test_signed_bars_hang_from_the_zero_line() -> None:
    geometry = layout(Chart("c", "x", "y", (Bar("up", 2.0), Bar("down", -1.0)), signed=True))
    up, down = geometry.bars
    assert up.y + up.height == pytest.approx(geometry.zero_y, abs=0.011)
    assert down.y == geometry.zero_y
    assert [tick.label for tick in geometry.ticks] == ["-1", "0", "1", "2"]


def test_many_bars_keep_values_out_of_the_picture() -> None:
    bars = tuple(Bar(str(i), float(i)) for i in range(100))
    geometry = layout(Chart("c", "x", "y", bars))
    assert all(bar.value_label is None for bar in geometry.bars)
    assert [bar.category_label for bar in geometry.bars if bar.category_label] == ["0", "99"]
    assert geometry.bars[5].title == "5: 5"  # the tooltip still says it


def test_number_format() -> None:
    assert fmt(1.0) == "1"
    assert fmt(-0.0) == "0"
    assert fmt(1 / 3) == "0.333333"
    assert fmt(16384) == "16384"
    assert fmt(None) == "\u2013"
