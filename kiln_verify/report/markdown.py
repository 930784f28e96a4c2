"""A :class:`~kiln_verify.report.document.Document` as GitHub-flavoured Markdown.

For pull requests and experiment logs, where a page cannot be attached but text can.
Charts become their data tables (Markdown has no safe inline picture). Markdown passes
raw HTML through, so peer text is escaped here as well: ``&``, ``<`` and ``>`` become
entities, the inline markup characters (backslash, backtick, ``*``, ``_``, brackets, ``|``,
``~``) are backslash-escaped, and so is a leading block marker (``#``, ``-``, ``>``,
``1.``); a name like ``<img onerror=...>`` or ``[x](javascript:...)`` is shown, never
rendered. Verbatim text
goes into a fenced block whose fence is longer than any backtick run inside it (a diff of
recorded and live values into a ``diff`` block, one line per side: builders pass texts
without line breaks).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kiln_verify.report.document import (
    Block,
    Cell,
    Chart,
    Details,
    Diff,
    Document,
    KeyValues,
    Notice,
    Paragraph,
    Preformatted,
    Table,
)

__all__ = ["escape_markdown", "render_markdown"]

_INLINE = re.compile(r"([\\`*_\[\]|~])")
_LINE_START = re.compile(r"^([#+=>-]|\d+(?=[.)]))")
_TONE_WORD = {"bad": "**", "warn": "*", "good": "", "plain": "", "muted": ""}


def escape_markdown(text: str, *, line_start: bool = False) -> str:
    """``text`` as literal inline Markdown (one line: line breaks become spaces);
    ``line_start``: it begins a line, where ``-``, ``#`` or ``1.`` would start a block."""
    text = " ".join(text.split("\n"))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _INLINE.sub(r"\\\1", text)
    if line_start:
        match = _LINE_START.match(text)
        if match is not None:
            end = match.end()
            text = text[:end] + "\\" + text[end:] if match.group(1)[0].isdigit() else "\\" + text
    return text


def _cell(cell: Cell) -> str:
    text = escape_markdown(cell.text)
    mark = _TONE_WORD[cell.tone]
    return f"{mark}{text}{mark}" if text and mark else text


def _table(caption: str, columns: tuple[str, ...], rows: Sequence[tuple[Cell, ...]]) -> list[str]:
    lines = [f"*{escape_markdown(caption)}*", ""]
    lines.append("| " + " | ".join(escape_markdown(column) for column in columns) + " |")
    aligns = (" ---: " if numeric else " --- " for numeric in _numeric(rows, len(columns)))
    lines.append("|" + "|".join(aligns) + "|")
    lines.extend("| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows)
    lines.append("")
    return lines


def _numeric(rows: Sequence[tuple[Cell, ...]], width: int) -> list[bool]:
    if not rows:
        return [False] * width
    return [all(row[i].numeric for row in rows) for i in range(width)]


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _block(block: Block, depth: int) -> list[str]:
    if isinstance(block, Paragraph):
        text = escape_markdown(block.text, line_start=True)
        return [f"**{text}**" if block.tone == "bad" else text, ""]
    if isinstance(block, Notice):
        word = "Note" if block.tone in ("good", "plain") else "Warning"
        return [f"> **{word}:** {escape_markdown(block.text)}", ""]
    if isinstance(block, KeyValues):
        return _table(block.caption, ("", ""), [(Cell(key), cell) for key, cell in block.items])
    if isinstance(block, Table):
        rows = list(block.rows) + ([block.footer] if block.footer else [])
        return _table(block.caption, block.columns, rows)
    if isinstance(block, Chart):
        table = block.table()
        return _table(table.caption, table.columns, list(table.rows))
    if isinstance(block, Preformatted):
        fence = _fence(block.text)
        label = escape_markdown(block.label, line_start=True)
        return [f"{label}:", "", f"{fence}text", block.text, fence, ""]
    if isinstance(block, Diff):
        lines = [f"- recorded  {block.recorded}", f"+ live      {block.live}"]
        fence = _fence("\n".join(lines))
        label = escape_markdown(block.label, line_start=True)
        return [f"{label}:", "", f"{fence}diff", *lines, fence, ""]
    assert isinstance(block, Details)
    heading = escape_markdown(block.summary, line_start=True)
    lines = [f"{'#' * min(depth + 1, 6)} {heading}", ""]
    for inner in block.blocks:
        lines.extend(_block(inner, depth + 1))
    return lines


def render_markdown(document: Document) -> bytes:
    """The report as UTF-8 Markdown (LF line ends, one trailing newline)."""
    title = escape_markdown(document.title, line_start=True)
    lines = [f"# {title}", "", escape_markdown(document.subtitle, line_start=True), ""]
    if document.metrics:
        rows = [(Cell(item.label), Cell(item.value, item.tone)) for item in document.metrics]
        lines.extend(_table("Summary", ("", ""), rows))
    for section in document.sections:
        lines.extend([f"## {escape_markdown(section.title, line_start=True)}", ""])
        for block in section.blocks:
            lines.extend(_block(block, 2))
    kind, generator = escape_markdown(document.kind), escape_markdown(document.generator)
    lines.append(f"*{kind} report written by {generator}*")
    text = "\n".join(lines)
    return (text.rstrip("\n") + "\n").encode("utf-8")
