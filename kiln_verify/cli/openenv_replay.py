"""`kiln-verify openenv replay`: exact live replay of a rollout bundle (contract §7.1).

Offline verification first, then rediscovery of every captured environment and a
re-run of every recorded exchange. Exit 0 with the ``kiln.openenv-replay-run.v1``
report; exit 1 with a typed error (``replay_drift`` names environment, group,
candidate, step and field; transport and timeout errors keep the client's codes);
exit 2 for usage errors (a wrong number of ``--credential-env`` slots, say). ``--json``
prints the report, or ``{"error": {...}}`` with the drift, on stdout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from kiln_verify.errors import KilnError, ReplayDrift
from kiln_verify.openenv.records.serialize import report_bytes
from kiln_verify.openenv.replay import (
    DEFAULT_CAPACITY_WAIT_S,
    DEFAULT_CONCURRENCY,
    replay_bundle,
)

__all__ = ["register", "replay_command"]


def replay_command(
    summary: Annotated[
        Path,
        typer.Option("--summary", metavar="PATH", help="The rollout summary (receipt) to replay."),
    ] = Path("openenv.rollout-summary.json"),
    dataset: Annotated[
        Path | None,
        typer.Option("--dataset", metavar="PATH", help="Override the recorded JSONL corpus path."),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay", metavar="PATH", help="Override the recorded replay manifest path."
        ),
    ] = None,
    credential_env: Annotated[
        list[str] | None,
        typer.Option(
            "--credential-env",
            metavar="NAME",
            help="Bearer-token variable NAME per captured environment, in environment "
            "order; '-' = public. Give none or exactly one per environment.",
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option("--concurrency", metavar="N", help="Candidates of a group replayed at once."),
    ] = DEFAULT_CONCURRENCY,
    capacity_wait_seconds: Annotated[
        int,
        typer.Option(
            "--capacity-wait-seconds",
            metavar="SECONDS",
            help="How long to retry CAPACITY_REACHED per session.",
        ),
    ] = DEFAULT_CAPACITY_WAIT_S,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report (or the error) as JSON.")
    ] = False,
) -> None:
    """Replay a verified bundle against the live environments; any difference is drift."""
    slots = [None if slot == "-" else slot for slot in credential_env or []]
    try:
        report = replay_bundle(
            summary,
            dataset_path=dataset,
            replay_path=replay,
            credential_envs=slots,
            concurrency=concurrency,
            capacity_wait_seconds=capacity_wait_seconds,
        )
    except KilnError as exc:
        if as_json:
            typer.echo(json.dumps({"error": exc.to_dict()}, indent=2, ensure_ascii=False))
        else:
            typer.echo(f"error: {exc}", err=True)
            if isinstance(exc, ReplayDrift):
                for key, value in exc.drift.items():
                    typer.echo(f"  {key}: {value}", err=True)
        raise typer.Exit(exc.exit_code) from None
    if as_json:
        typer.echo(report_bytes(report).decode("utf-8"), nl=False)
        return
    table = Table(title="OpenEnv bundle replayed live: no drift", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in report.to_json().items():
        table.add_row(key, str(value))
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command to the ``openenv`` command group."""
    app.command("replay")(replay_command)
