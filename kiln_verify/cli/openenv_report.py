"""`kiln-verify openenv report`: a self-contained HTML (or Markdown) report.

One command, one input kind per call: a rollout bundle (``--summary``, the default: it is
verified offline first and a bundle verification refuses is refused here with the
verifier's code), a conformance run's JSON report (``--conformance``), an evaluation
receipt with its two summaries (``--receipt``), or a live replay's result as
``openenv replay --json`` printed it (``--replay-run``; ``--replay`` already names the
bundle's replay manifest). Parse, call one engine function, write the bytes; exit 0
written, 1 inputs refused, 2 usage.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from kiln_verify.cli.output import fail, print_json
from kiln_verify.errors import KilnError, UsageError

__all__ = ["register", "report_command"]

_DEFAULT_SUMMARY = Path("openenv.rollout-summary.json")
_SIDE_SUMMARY = "openenv.rollout-summary.json"


def _kind(
    summary: Path | None, conformance: Path | None, receipt: Path | None, replay_run: Path | None
) -> str:
    given = [
        name
        for name, value in (
            ("--summary", summary),
            ("--conformance", conformance),
            ("--receipt", receipt),
            ("--replay-run", replay_run),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise UsageError(
            f"{' and '.join(given)} name two reports; give one input kind per report",
            hint="a bundle (--summary), a conformance report (--conformance), an "
            "evaluation receipt (--receipt) or a live replay's result (--replay-run)",
        )
    return {
        "--conformance": "conformance",
        "--receipt": "evaluation",
        "--replay-run": "replay",
    }.get(given[0] if given else "--summary", "bundle")


_OUTPUT = typer.Option(..., "--output", "-o", metavar="PATH", help="The report file to write.")
_SUMMARY = typer.Option(
    None,
    "--summary",
    metavar="PATH",
    help="A rollout bundle's summary (the default input: ./openenv.rollout-summary.json).",
)
_DATASET = typer.Option(
    None, "--dataset", metavar="PATH", help="Override the bundle's recorded corpus path."
)
_REPLAY = typer.Option(
    None, "--replay", metavar="PATH", help="Override the bundle's recorded replay path."
)
_CONFORMANCE = typer.Option(
    None,
    "--conformance",
    metavar="PATH",
    help="A conformance report JSON file (pytest --kiln-report).",
)
_RECEIPT = typer.Option(
    None, "--receipt", metavar="PATH", help="An evaluation receipt (openenv evaluate)."
)
_BASELINE_SUMMARY = typer.Option(
    None,
    "--baseline-summary",
    metavar="PATH",
    help="With --receipt: the baseline's summary (default: baseline/ beside the receipt).",
)
_CANDIDATE_SUMMARY = typer.Option(
    None,
    "--candidate-summary",
    metavar="PATH",
    help="With --receipt: the candidate's summary (default: candidate/ beside the receipt).",
)
_REPLAY_RUN = typer.Option(
    None,
    "--replay-run",
    metavar="PATH",
    help="A live replay's result: what `openenv replay --json` printed (the run report, "
    "or the replay_drift error).",
)
_MARKDOWN = typer.Option(False, "--markdown", help="Write Markdown instead of HTML.")
_FORCE = typer.Option(False, "--force", help="Replace an existing report file.")
_JSON = typer.Option(False, "--json", help="Print what was written (or the error) as JSON.")


def report_command(
    output: Path = _OUTPUT,
    summary: Path | None = _SUMMARY,
    dataset: Path | None = _DATASET,
    replay: Path | None = _REPLAY,
    conformance: Path | None = _CONFORMANCE,
    receipt: Path | None = _RECEIPT,
    baseline_summary: Path | None = _BASELINE_SUMMARY,
    candidate_summary: Path | None = _CANDIDATE_SUMMARY,
    replay_run: Path | None = _REPLAY_RUN,
    markdown: bool = _MARKDOWN,
    force: bool = _FORCE,
    as_json: bool = _JSON,
) -> None:
    """Render a report people can look at: bundle, conformance run, evaluation or replay."""
    from kiln_verify.report import engine

    output_format: engine.Format = "markdown" if markdown else "html"
    try:
        kind = _kind(summary, conformance, receipt, replay_run)
        if kind != "bundle" and (dataset is not None or replay is not None):
            raise UsageError("--dataset and --replay belong to a bundle report (--summary)")
        if kind != "evaluation" and (baseline_summary is not None or candidate_summary is not None):
            raise UsageError("--baseline-summary and --candidate-summary need --receipt")
        engine.check_output(output, force=force)
        if kind == "conformance":
            assert conformance is not None
            rendered = engine.conformance_report(conformance, output_format=output_format)
        elif kind == "replay":
            assert replay_run is not None
            rendered = engine.replay_report(replay_run, output_format=output_format)
        elif kind == "evaluation":
            assert receipt is not None
            beside = receipt.parent
            rendered = engine.evaluation_report(
                receipt,
                baseline_summary or beside / "baseline" / _SIDE_SUMMARY,
                candidate_summary or beside / "candidate" / _SIDE_SUMMARY,
                output_format=output_format,
            )
        else:
            rendered = engine.bundle_report(
                summary or _DEFAULT_SUMMARY,
                dataset_path=dataset,
                replay_path=replay,
                output_format=output_format,
            )
        engine.publish_report(output, rendered.data, force=force)
    except KilnError as exc:
        fail(exc, as_json=as_json)
    shown = os.fspath(output)
    if as_json:
        print_json(rendered.receipt(shown))
    else:
        typer.echo(f"{rendered.kind} report written to {shown} ({len(rendered.data)} bytes)")


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to the ``openenv`` command group."""
    app.command("report")(report_command)
