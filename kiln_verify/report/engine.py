"""Build, render and publish a report: the one call a front end makes per report.

Each ``*_report`` function verifies its inputs (raising the verifier's typed error when
they are refused), builds the document and renders it; :func:`publish_report` writes the
bytes with the library's atomic publication, which never replaces an existing file
unless asked to (``--force``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.publish import publish_bytes, replace_bytes
from kiln_verify.errors import TargetExists
from kiln_verify.report.document import Document

__all__ = [
    "Format",
    "RenderedReport",
    "bundle_report",
    "check_output",
    "conformance_report",
    "evaluation_report",
    "publish_report",
    "render",
    "replay_report",
]

Format = Literal["html", "markdown"]


@dataclass(frozen=True, slots=True)
class RenderedReport:
    kind: str
    format: Format
    data: bytes

    def receipt(self, path: str) -> dict[str, Any]:
        """What ``--json`` prints about a written report."""
        return {
            "kind": self.kind,
            "format": self.format,
            "output": path,
            "bytes": len(self.data),
            "sha256": str(sha256_bytes(self.data)),
        }


def render(document: Document, output_format: Format = "html") -> RenderedReport:
    if output_format == "markdown":
        from kiln_verify.report.markdown import render_markdown

        return RenderedReport(document.kind, "markdown", render_markdown(document))
    from kiln_verify.report.html import render_html

    return RenderedReport(document.kind, "html", render_html(document))


def bundle_report(
    summary_path: str | os.PathLike[str],
    *,
    dataset_path: str | os.PathLike[str] | None = None,
    replay_path: str | os.PathLike[str] | None = None,
    output_format: Format = "html",
) -> RenderedReport:
    """Verify the bundle offline (its error propagates), then report on it."""
    from kiln_verify.report.bundle import bundle_document
    from kiln_verify.report.bundle_facts import gather

    facts = gather(summary_path, dataset_path=dataset_path, replay_path=replay_path)
    return render(bundle_document(facts), output_format)


def conformance_report(
    report_path: str | os.PathLike[str], *, output_format: Format = "html"
) -> RenderedReport:
    """Read a ``kiln-verify.conformance-report.v2`` (or v1) file strictly, then report on it."""
    from kiln_verify.report.conformance import conformance_document, read_conformance_report

    return render(conformance_document(read_conformance_report(report_path)), output_format)


def evaluation_report(
    receipt_path: str | os.PathLike[str],
    baseline_summary: str | os.PathLike[str],
    candidate_summary: str | os.PathLike[str],
    *,
    output_format: Format = "html",
) -> RenderedReport:
    """Verify both bundles, re-derive the receipt from them, then report on it."""
    from kiln_verify.report.evaluation import evaluation_document, load_evaluation

    facts = load_evaluation(receipt_path, baseline_summary, candidate_summary)
    return render(evaluation_document(facts), output_format)


def replay_report(
    result_path: str | os.PathLike[str], *, output_format: Format = "html"
) -> RenderedReport:
    """Read a saved ``openenv replay --json`` result strictly, then report on it."""
    from kiln_verify.report.replay import replay_document
    from kiln_verify.report.replay_input import read_replay_result

    return render(replay_document(read_replay_result(result_path)), output_format)


def check_output(path: str | os.PathLike[str], *, force: bool = False) -> None:
    """Refuse an existing output before any work (``target_exists``) unless ``force``;
    publication checks again, atomically, when it writes."""
    if not force and os.path.lexists(path):
        raise TargetExists("the report file already exists", path=os.fspath(path))


def publish_report(path: str | os.PathLike[str], data: bytes, *, force: bool = False) -> None:
    """Write ``data`` atomically; an existing file is refused unless ``force``, which
    replaces a regular file atomically (a reader sees the old report or the new one)."""
    if force:
        replace_bytes(path, data)
    else:
        publish_bytes(path, data)
