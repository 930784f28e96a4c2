"""Hand-sized SVG bar charts: geometry here, markup in the template (docs/ARCHITECTURE.md).

A report's charts are bar charts (histograms, counts, signed per-seed differences), so a
few rectangles, axis lines and text labels say everything. This module computes where
they go, in a fixed 720 x 280 viewBox, with every coordinate rounded to two decimals so
the markup is byte-stable; the Jinja template writes the elements and escapes every
label. Values may be any finite floats, however large: positions are computed from
halves (``v/2 - lo/2``), which cannot overflow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kiln_verify.limits import REPORT_CHART_LABELLED_BARS
from kiln_verify.report.document import Bar, Chart, fmt

__all__ = ["ChartGeometry", "histogram", "histogram_bars", "layout"]

WIDTH = 720.0
HEIGHT = 280.0
LEFT, RIGHT, TOP, BOTTOM = 64.0, 12.0, 22.0, 70.0
UPRIGHT_LABELS = 6
"""Up to this many bars category labels are written level; beyond, at a slant."""
LABEL_CHARS = 14


@dataclass(frozen=True, slots=True)
class BarBox:
    x: float
    y: float
    width: float
    height: float
    tone: str
    title: str
    value_label: str | None
    value_y: float
    category_label: str | None
    center: float
    label_y: float


@dataclass(frozen=True, slots=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True, slots=True)
class ChartGeometry:
    width: float
    height: float
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    zero_y: float
    bars: tuple[BarBox, ...]
    ticks: tuple[Tick, ...]
    title: str
    value_axis: str
    category_axis: str
    slanted: bool


def _round(value: float) -> float:
    return round(value, 2) + 0.0  # + 0.0 turns -0.0 into 0.0


def _fraction(value: float, lo: float, hi: float) -> float:
    """Where ``value`` sits in ``[lo, hi]`` (0..1), without overflow for any finite input."""
    span = hi / 2 - lo / 2
    return 0.0 if span == 0 else (value / 2 - lo / 2) / span


def _nice_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """A range covering ``[lo, hi]`` with about five round tick values."""
    if lo == hi:
        lo, hi = (lo - 1.0, hi + 1.0) if lo != 0 else (0.0, 1.0)
    span = hi / 2 - lo / 2
    raw = span / 2  # (hi - lo) / 4, from the halves
    if not math.isfinite(raw) or raw <= 0 or raw > 1e300:
        return lo, hi, [lo, hi]
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1.0, 2.0, 5.0, 10.0) if m * magnitude >= raw)
    start, stop = math.floor(lo / step), math.ceil(hi / step)
    ticks = [(start + i) * step for i in range(int(stop - start) + 1)]
    return ticks[0], ticks[-1], ticks


def _label(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "\u2026"


def layout(chart: Chart) -> ChartGeometry:
    """Positions of every bar, tick and label of ``chart`` (at least one bar)."""
    values = [bar.value for bar in chart.bars]
    lo = min([0.0, *values])
    hi = max([0.0, *values])
    lo, hi, tick_values = _nice_ticks(lo, hi)
    left, right = LEFT, WIDTH - RIGHT
    top, bottom = TOP, HEIGHT - BOTTOM

    def y_of(value: float) -> float:
        return bottom - _fraction(value, lo, hi) * (bottom - top)

    zero = y_of(0.0)
    count = max(len(chart.bars), 1)
    slot = (right - left) / count
    gap = min(slot * 0.2, 6.0) if count > 1 else slot * 0.3
    labelled = count <= REPORT_CHART_LABELLED_BARS
    every = 1 if labelled else max(1, count - 1)  # many bars: first and last category only
    boxes: list[BarBox] = []
    for index, bar in enumerate(chart.bars):
        x = left + index * slot + gap / 2
        end = y_of(bar.value)
        y, height = (end, zero - end) if bar.value >= 0 else (zero, end - zero)
        above = bar.value >= 0
        boxes.append(
            BarBox(
                x=_round(x),
                y=_round(y),
                width=_round(max(slot - gap, 0.5)),
                height=_round(max(height, 0.0)),
                tone=bar.tone,
                title=f"{bar.label}: {fmt(bar.value)}",
                value_label=fmt(bar.value) if labelled else None,
                value_y=_round(y - 4 if above else y + height + 12),
                category_label=_label(bar.label) if index % every == 0 else None,
                center=_round(x + (slot - gap) / 2),
                label_y=_round(bottom + 14),
            )
        )
    ticks = tuple(Tick(_round(y_of(value)), fmt(value)) for value in tick_values)
    return ChartGeometry(
        width=WIDTH,
        height=HEIGHT,
        plot_left=left,
        plot_right=right,
        plot_top=top,
        plot_bottom=bottom,
        zero_y=_round(zero),
        bars=tuple(boxes),
        ticks=ticks,
        title=chart.title,
        value_axis=chart.value,
        category_axis=chart.category,
        slanted=count > UPRIGHT_LABELS,
    )


def histogram(values: Sequence[float], bins: int) -> list[tuple[float, float, int]]:
    """``(low, high, count)`` of ``bins`` equal-width bins over ``[min, max]`` (the last
    bin includes ``max``); one bin when every value is the same; none for no values."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if lo == hi:
        return [(lo, hi, len(values))]
    counts = [0] * bins
    for value in values:
        index = min(int(_fraction(value, lo, hi) * bins), bins - 1)
        counts[index] += 1
    span = hi / 2 - lo / 2  # edges from the halves: exact scaling, never an overflow
    edges = [2 * (lo / 2 + span * i / bins) for i in range(bins)] + [hi]
    return [(edges[i], edges[i + 1], counts[i]) for i in range(bins)]


def histogram_bars(values: Sequence[float], bins: int) -> tuple[Bar, ...]:
    """A histogram as chart bars labelled ``low to high``."""
    return tuple(
        Bar(f"{fmt(low)} to {fmt(high)}", float(count))
        for low, high, count in histogram(values, bins)
    )
