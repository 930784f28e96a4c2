"""The report document: what every report says, before it is HTML or Markdown.

A report builder (bundle, conformance, evaluation, replay) turns a typed,
already-verified input into a :class:`Document` of sections and blocks; the two renderers
(:mod:`.html`, :mod:`.markdown`) turn any document into bytes. Builders never write
markup, so escaping and layout live in the renderers alone, and a new report is one more
small builder. A :class:`Chart` carries its own data and every renderer writes that data
as a table too, so no number is ever only in a picture.

Numbers are formatted here, once (:func:`fmt`), so that a chart label, a table cell and a
test looking for a value in the page all spell it the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Bar",
    "Block",
    "Cell",
    "Chart",
    "Details",
    "Diff",
    "Document",
    "KeyValues",
    "Metric",
    "Notice",
    "Paragraph",
    "Preformatted",
    "Section",
    "Table",
    "Tone",
    "diff_spans",
    "excerpt",
    "fmt",
    "percent",
]

Tone = Literal["plain", "good", "bad", "warn", "muted"]
"""How a value reads: a verdict's colour, a flagged row; renderers map it to a class."""


def fmt(value: int | float | None) -> str:
    """One spelling per number: integers in full, floats to six significant digits
    (``-0`` shown as ``0``), ``None`` as an en dash."""
    if value is None:
        return "\u2013"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return repr(value)
    text = f"{value:.6g}"
    return "0" if text == "-0" else text


def percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage with one decimal (``0.0 %`` of nothing)."""
    return f"{(100.0 * part / whole) if whole else 0.0:.1f} %"


def excerpt(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\u2026 [{len(text) - limit} more characters]"


@dataclass(frozen=True, slots=True)
class Cell:
    """One table cell: its text, tone, whether it is a number (right-aligned) and an
    optional in-page anchor it links to (anchors are made by builders, never from peer
    text)."""

    text: str
    tone: Tone = "plain"
    numeric: bool = False
    anchor: str | None = None

    @classmethod
    def num(cls, value: int | float | None, tone: Tone = "plain") -> Cell:
        return cls(fmt(value), tone, numeric=True)


@dataclass(frozen=True, slots=True)
class Metric:
    """A headline number at the top of a report."""

    label: str
    value: str
    tone: Tone = "plain"


@dataclass(frozen=True, slots=True)
class Paragraph:
    text: str
    tone: Tone = "plain"


@dataclass(frozen=True, slots=True)
class Notice:
    """A warning or a verdict that must not be missed."""

    text: str
    tone: Tone = "warn"


@dataclass(frozen=True, slots=True)
class KeyValues:
    """A two-column table of named facts."""

    caption: str
    items: tuple[tuple[str, Cell], ...]


@dataclass(frozen=True, slots=True)
class Table:
    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    #: Rows a renderer may mark as the table's total (shown last, in bold).
    footer: tuple[Cell, ...] | None = None
    anchor: str | None = None

    def __post_init__(self) -> None:
        width = len(self.columns)
        for row in (*self.rows, *((self.footer,) if self.footer else ())):
            if len(row) != width:
                raise ValueError(f"table {self.caption!r}: a row has {len(row)} cells, not {width}")


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its category, its value and an optional tone (e.g. negative in red)."""

    label: str
    value: float
    tone: Tone = "plain"


@dataclass(frozen=True, slots=True)
class Chart:
    """A bar chart; renderers draw it and always write its data as a table as well.

    ``category`` and ``value`` name the two columns of that table (and the two axes).
    ``signed``: values may be negative and the zero line is drawn.
    """

    title: str
    category: str
    value: str
    bars: tuple[Bar, ...]
    signed: bool = False

    def table(self) -> Table:
        """The chart's data, one row per bar, in bar order."""
        return Table(
            caption=f"{self.title} (data)",
            columns=(self.category, self.value),
            rows=tuple((Cell(bar.label), Cell.num(bar.value, bar.tone)) for bar in self.bars),
        )


@dataclass(frozen=True, slots=True)
class Preformatted:
    """Verbatim text (an observation, an error's evidence), shown monospaced."""

    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Diff:
    """A recorded and a live value side by side (one line each, as a unified diff shows
    them), with the part where they differ marked by the renderer (:func:`diff_spans`)."""

    label: str
    recorded: str
    live: str

    def __post_init__(self) -> None:
        if any(mark in text for text in (self.recorded, self.live) for mark in "\r\n"):
            raise ValueError(f"diff {self.label!r}: each side must be one line")


def diff_spans(recorded: str, live: str) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    """Each text as (common prefix, the part that differs, common suffix): the longest
    common prefix, then the longest common suffix of what is left."""
    limit = min(len(recorded), len(live))
    start = 0
    while start < limit and recorded[start] == live[start]:
        start += 1
    end = 0
    while end < limit - start and recorded[-1 - end] == live[-1 - end]:
        end += 1
    return (
        (recorded[:start], recorded[start : len(recorded) - end], recorded[len(recorded) - end :]),
        (live[:start], live[start : len(live) - end], live[len(live) - end :]),
    )


@dataclass(frozen=True, slots=True)
class Details:
    """A titled group of blocks (HTML: an open ``<details>``, readable without a click)."""

    summary: str
    blocks: tuple[Block, ...]
    tone: Tone = "plain"
    anchor: str | None = None
    open: bool = True


Block = Paragraph | Notice | KeyValues | Table | Chart | Preformatted | Diff | Details


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    blocks: tuple[Block, ...]
    anchor: str


@dataclass(frozen=True, slots=True)
class Document:
    """A whole report: title, one-line subtitle, headline metrics, sections."""

    kind: str
    title: str
    subtitle: str
    metrics: tuple[Metric, ...]
    sections: tuple[Section, ...]
    generator: str = field(default="kiln-verify")
