"""`kiln-verify openenv verify`: offline verification of a rollout bundle (contract §6).

Exit 0 with the ``kiln.openenv-verification.v1`` report; exit 1 with the typed error's
code, rule, file and location (``--json`` prints either as JSON on stdout).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kiln_verify.errors import KilnError
from kiln_verify.openenv.records.serialize import report_bytes
from kiln_verify.openenv.verify import verify_bundle

__all__ = ["register", "verify_command"]

_SUMMARY = typer.Option(
    Path("openenv.rollout-summary.json"),
    "--summary",
    metavar="PATH",
    help="The rollout summary (receipt) to verify.",
)
_DATASET = typer.Option(
    None, "--dataset", metavar="PATH", help="Override the recorded JSONL corpus path."
)
_REPLAY = typer.Option(
    None, "--replay", metavar="PATH", help="Override the recorded replay manifest path."
)
_JSON = typer.Option(False, "--json", help="Print the report (or the error) as JSON.")
_SHARD = typer.Option(
    None,
    "--shard",
    metavar="DIR",
    help="Verify a shard journal (`rollout --groups-range`) instead of a bundle.",
)


def verify_command(
    summary: Path = _SUMMARY,
    dataset: Path | None = _DATASET,
    replay: Path | None = _REPLAY,
    as_json: bool = _JSON,
    shard: Path | None = _SHARD,
) -> None:
    """Verify a rollout bundle offline: digests, replay, plans, provenance, statistics."""
    if shard is not None:
        _verify_shard(shard, as_json=as_json)
        return
    try:
        report = verify_bundle(summary, dataset_path=dataset, replay_path=replay)
    except KilnError as exc:
        if as_json:
            typer.echo(json.dumps({"error": exc.to_dict()}, indent=2, ensure_ascii=False))
        else:
            typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    if as_json:
        typer.echo(report_bytes(report).decode("utf-8"), nl=False)
        return
    table = Table(title="OpenEnv bundle verified", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in report.to_json().items():
        table.add_row(key, str(value))
    Console().print(table)


def _verify_shard(path: Path, *, as_json: bool) -> None:
    """A shard is our own record, not a bundle: its chain, seal and planned groups are
    checked (docs/resume-and-shards.md); Kiln's bundle rules run on the merged bundle."""
    from kiln_verify.openenv.collect.merge import read_shard

    try:
        found = read_shard(path)
    except KilnError as exc:
        if as_json:
            typer.echo(json.dumps({"error": exc.to_dict()}, indent=2, ensure_ascii=False))
        else:
            typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    report = {
        "schema": "kiln-verify.openenv-shard-verification.v1",
        "shard": str(path),
        "groups_start": found.range.start,
        "groups_stop": found.range.stop,
        "plan_groups": found.controls.options.groups,
        "rollouts": sum(len(group.episodes) for group in found.groups),
        "last_sha256": str(found.files.last_sha256),
    }
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    table = Table(title="OpenEnv shard verified", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in report.items():
        table.add_row(key, str(value))
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to the ``openenv`` command group."""
    app.command("verify")(verify_command)
