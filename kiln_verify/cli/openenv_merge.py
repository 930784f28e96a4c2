"""`kiln-verify openenv merge S1 S2 ... --output-dir DIR`: shards into one bundle.

Each ``S`` is a sealed journal of a group range (``openenv rollout --groups-range A:B
--journal S``). Every shard is verified first; shards of different controls, plans,
environment identities or policies, overlapping ranges and a plan the ranges do not
cover are refused with their own codes; the bundle, byte-identical to one collection of
the whole plan, is published into DIR under the file names the shards recorded, all three
together or none (docs/resume-and-shards.md). Exit status: 0 published, 1 refused, 2 usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kiln_verify.cli.output import fail, print_json
from kiln_verify.errors import KilnError

__all__ = ["merge_command", "register"]


def merge_command(
    shards: Annotated[
        list[Path], typer.Argument(metavar="SHARD...", help="Shard journal directories.")
    ],
    output_dir: Annotated[
        Path, typer.Option("--output-dir", metavar="DIR", help="Directory for the bundle.")
    ],
    force: Annotated[bool, typer.Option("--force", help="Replace existing output files.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the paths (or the error) as JSON.")
    ] = False,
) -> None:
    """Verify shards of one collection and publish the bundle of the whole plan."""
    from kiln_verify.openenv.collect.merge import merge_shards, publish_merged

    try:
        controls, bundle = merge_shards(shards)
        paths = publish_merged(controls, bundle, output_dir, force=force)
    except KilnError as exc:
        fail(exc, as_json=as_json)
    dataset, replay, summary = (str(path) for path in paths)
    if as_json:
        print_json(
            {
                "summary": summary,
                "dataset": dataset,
                "replay": replay,
                "shards": len(shards),
                "groups": controls.options.groups,
            }
        )
        return
    Console().print(
        f"merged {len(shards)} shards ({controls.options.groups} groups): {summary}, "
        f"{dataset}, {replay}"
    )


def register(app: typer.Typer) -> None:
    """Add the ``merge`` command to the ``openenv`` command group."""
    app.command("merge")(merge_command)
