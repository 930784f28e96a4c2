"""Reading back what a report page contains (our own deterministic markup)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

_FIGURE = re.compile(r"<figure>(.*?)</figure>\s*<table>(.*?)</table>", re.S)
_VALUE = re.compile(r'<text class="value"[^>]*>([^<]*)</text>')
_BAR_TITLE = re.compile(r"<rect [^>]*><title>([^<]*)</title></rect>")
_CELL = re.compile(r"<td[^>]*>([^<]*)</td>")


def chart_tables(page: str) -> list[tuple[list[str], list[str], list[str]]]:
    """Per chart: the values written on its bars, its bar tooltips, and its table's cells."""
    found = []
    for figure, table in _FIGURE.findall(page):
        values = [html.unescape(v) for v in _VALUE.findall(figure)]
        titles = [html.unescape(t) for t in _BAR_TITLE.findall(figure)]
        cells = [html.unescape(c) for c in _CELL.findall(table)]
        found.append((values, titles, cells))
    return found


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend((tag, name, value or "") for name, value in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def elements(page: str) -> _Elements:
    """Every start tag, attribute and text run of ``page`` as a browser's parser sees them."""
    parser = _Elements()
    parser.feed(page)
    parser.close()
    return parser
