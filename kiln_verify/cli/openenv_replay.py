"""`kiln-verify openenv replay`: exact live replay of a rollout bundle (contract §7.1).

Offline verification first, then rediscovery of every captured environment and a
re-run of every recorded exchange. Exit 0 with the ``kiln.openenv-replay-run.v1``
report; exit 1 with a typed error (``replay_drift`` names environment, group,
candidate, step and field of the first drift and counts every drifted candidate and
exchange; transport and timeout errors keep the client's codes); exit 2 for usage
errors (a wrong number of ``--credential-env`` slots, say). ``--json`` prints
``{"report": <Kiln's exact kiln.openenv-replay-run.v1>, "kiln_verify": <our
kiln-verify.replay-run-notes.v1>}``, or ``{"error": {...}}`` with the drift, its totals
and its ``detail`` (every drifted exchange kept), on stdout: saved to a file, either one is
what ``openenv report --replay-run`` renders. The lines printed without ``--json`` leave
the detail out.

``--environment-url OLD=NEW`` replays a moved deployment; ``--oracle [NAME]`` starts the
embedded oracle in-process (by default the server matching each captured identity) and
replays against it; ``--strict-state`` compares volatile state fields exactly too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperCommand

from kiln_verify.cli.embedded_oracle import EmbeddedOracle
from kiln_verify.cli.output import fail
from kiln_verify.errors import KilnError, ReplayDrift
from kiln_verify.openenv.protocol.access import EnvironmentAccess
from kiln_verify.openenv.records.reports import ReplayRunResult
from kiln_verify.openenv.records.serialize import report_bytes
from kiln_verify.openenv.replay import (
    DEFAULT_CAPACITY_WAIT_S,
    DEFAULT_CONCURRENCY,
    parse_environment_url,
    replay_bundle,
)

__all__ = ["register", "replay_command"]

#: ``--oracle`` without a value: match each captured environment's identity.
MATCH_ORACLE = ""


class _OptionalOracleCommand(TyperCommand):
    """Lets ``--oracle`` stand alone (``--oracle [NAME]``): typer options always take a
    value, so a bare ``--oracle`` (last, or followed by another option) is read as
    ``--oracle=`` before parsing."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's vendored Context
        rewritten: list[str] = []
        for index, arg in enumerate(args):
            if arg == "--":
                rewritten.extend(args[index:])
                break
            following = args[index + 1] if index + 1 < len(args) else None
            if arg == "--oracle" and (following is None or following.startswith("-")):
                rewritten.append(f"--oracle={MATCH_ORACLE}")
            else:
                rewritten.append(arg)
        return super().parse_args(ctx, rewritten)


def _drift_lines(exc: ReplayDrift) -> list[str]:
    lines = [f"  {key}: {value}" for key, value in exc.drift.items()]
    if exc.totals is not None:
        lines.append("  totals: " + ", ".join(f"{k} {v}" for k, v in exc.totals.items()))
    for item in exc.drifted or ():
        where = " ".join(
            f"{key.removesuffix('_index')} {item[key]}"
            for key in ("environment_index", "group_index", "candidate_index", "step_index")
            if key in item
        )
        lines.append(f"  drifted: {where} ({item['stage']}) {item['field']}")
    return lines


def _table(result: ReplayRunResult) -> Table:
    table = Table(title="OpenEnv bundle replayed live: no drift", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in result.report.to_json().items():
        table.add_row(key, str(value))
    notes = result.notes
    if notes.volatile:
        volatile = ", ".join(notes.volatile) + " (presence and JSON type only)"
        table.add_row("volatile", volatile)
    if notes.environment_remaps:
        remaps = "; ".join(_remap_text(entry.to_json()) for entry in notes.environment_remaps)
        table.add_row("environment_remaps", remaps)
    return table


def _remap_text(entry: dict[str, Any]) -> str:
    via = f"oracle {entry['oracle']}" if entry["source"] == "oracle" else "--environment-url"
    return (
        f"environment {entry['environment_index']}: {entry['recorded_base_url']} -> "
        f"{entry['base_url']} ({via})"
    )


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
    environment_url: Annotated[
        list[str] | None,
        typer.Option(
            "--environment-url",
            metavar="OLD=NEW",
            help="Replay the environment recorded at base URL OLD at NEW (repeat); every "
            "other identity field is still compared exactly.",
        ),
    ] = None,
    oracle: Annotated[
        str | None,
        typer.Option(
            "--oracle",
            metavar="[NAME]",
            help="Start the embedded oracle in-process and replay against it: by default "
            "the server matching each captured environment, or NAME.",
        ),
    ] = None,
    strict_state: Annotated[
        bool,
        typer.Option(
            "--strict-state",
            help="Compare session-identity state fields (episode_id) exactly as well.",
        ),
    ] = False,
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
        remaps = [parse_environment_url(text) for text in environment_url or []]
        provider = None if oracle is None else EmbeddedOracle(oracle).replay_provider()
        access = EnvironmentAccess(
            credential_envs=slots,
            concurrency=concurrency,
            capacity_wait_seconds=capacity_wait_seconds,
        )
        result = replay_bundle(
            summary,
            dataset_path=dataset,
            replay_path=replay,
            access=access,
            environment_urls=remaps,
            environment_provider=provider,
            strict_state=strict_state,
        )
    except KilnError as exc:
        extra = _drift_lines(exc) if isinstance(exc, ReplayDrift) else None
        fail(exc, as_json=as_json, extra_lines=extra)
    if as_json:
        typer.echo(report_bytes(result).decode("utf-8"), nl=False)
        return
    Console().print(_table(result))


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command to the ``openenv`` command group."""
    app.command("replay", cls=_OptionalOracleCommand)(replay_command)
