"""A :class:`~kiln_verify.report.document.Document` as one self-contained HTML page.

Jinja2 renders the page with autoescaping on for every value (docs/ARCHITECTURE.md says
why this library): peer text (environment names, observations, error messages, evidence)
can only ever be text in the page, never markup. Two more rules hold regardless of what a
builder passes in:

* nothing is fetched: no scripts, fonts, images or stylesheets from anywhere; the one
  stylesheet is inline, and a Content-Security-Policy allows exactly that stylesheet (by
  its SHA-256) and nothing else, so even markup that slipped past escaping could run no
  script and load no resource;
* the bytes are a pure function of the document: no timestamps, no random ids, charts
  with rounded coordinates, LF line ends.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from kiln_verify.report.charts import ChartGeometry, layout
from kiln_verify.report.document import Chart, Document, diff_spans

__all__ = ["content_security_policy", "render_html"]


@cache
def _stylesheet() -> str:
    text = resources.files("kiln_verify.report").joinpath("templates/style.css").read_text("utf-8")
    if "</" in text:  # it is inserted verbatim into a <style> element
        raise ValueError("the report stylesheet must not contain '</'")
    return text


def content_security_policy(css: str) -> str:
    """Allow the one inline stylesheet (by digest) and nothing else at all."""
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; "
        "script-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _kind(block: Any) -> str:
    return type(block).__name__


def _geometry(chart: Chart) -> ChartGeometry:
    return layout(chart)


@cache
def _template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("kiln_verify.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["kind"] = _kind
    environment.globals["geometry"] = _geometry
    environment.globals["diff_spans"] = diff_spans
    return environment.get_template("report.html.j2")


def render_html(document: Document) -> bytes:
    """The page's UTF-8 bytes (LF line ends, one trailing newline)."""
    css = _stylesheet()
    safe_css = Markup(css)  # noqa: S704 - the package's own constant stylesheet
    text = _template().render(doc=document, css=safe_css, csp=content_security_policy(css))
    return (text.rstrip("\n") + "\n").encode("utf-8")
