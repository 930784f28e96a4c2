"""`kiln-verify openenv verify-run DIR`: every link of one run directory, offline.

``DIR`` is a server's run directory or one ``openenv artifact RUN_ID --all`` wrote. Exit 0
with a summary (``--json``: our ``kiln-verify.run-verification.v1`` report); exit 1 with
the first broken link's code, which names the two records that disagree; exit 2 for a
usage error (a run with training evidence needs ``--adapter DIR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kiln_verify.cli.control_common import Json, echo_json
from kiln_verify.cli.output import fail
from kiln_verify.errors import KilnError

if TYPE_CHECKING:
    from kiln_verify.openenv.runcheck.records import RunVerificationReport

__all__ = ["register", "verify_run_command"]


def _summary_lines(report: RunVerificationReport) -> list[str]:
    head = f"run {report.run_id} ({report.run_kind}, {report.state})" if report.run_id else "bundle"
    lines = [f"{head} verified: {report.run_dir}"]
    for bundle in report.bundles:
        lines.append(
            f"  bundle {bundle.name}: {bundle.groups} groups, {bundle.rollouts} rollouts, "
            f"summary {bundle.summary_sha256}"
        )
    lines.append(f"  files: {len(report.files)} match the run's manifest")
    if report.training is not None:
        t = report.training
        lines.append(
            f"  training: adapter {t.output_adapter} ({t.adapter_files} files, "
            f"{t.adapter_bytes} bytes) trained on corpus {t.corpus_sha256} "
            f"(group plan {t.group_plan_sha256})"
        )
    if report.evaluation is not None:
        e = report.evaluation
        lines.append(
            f"  evaluation: {e.paired_groups} paired groups, improved {e.improved_groups}, "
            f"regressed {e.regressed_groups}, tied {e.tied_groups}, "
            f"p = {e.exact_sign_test_p_value!r}: {e.decision} -> {e.outcome}"
        )
    lines.append("  links: " + ", ".join(report.links))
    return lines


def verify_run_command(
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="The run directory (or a downloaded run).")
    ],
    adapter: Annotated[
        Path | None,
        typer.Option(
            "--adapter",
            metavar="DIR",
            help="The trained adapter's directory (needed when the run has training evidence).",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Verify a whole run offline: bundles, manifest, contract, training chain, evaluation."""
    from kiln_verify.openenv.runcheck.engine import verify_run

    try:
        report = verify_run(directory, adapter_dir=adapter)
    except KilnError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        echo_json(report.to_json())
        return
    for line in _summary_lines(report):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add the ``verify-run`` command to the ``openenv`` command group."""
    app.command("verify-run")(verify_run_command)
