"""`kiln-verify openenv status RUN_ID`: one run's status, optionally followed to its end."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from kiln_verify.cli.control_common import (
    URL_DEFAULT,
    Json,
    RunId,
    Url,
    echo_json,
    fail_on_outcome,
    follow_renderer,
    status_table,
    with_client,
)
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control_client.client import ControlClient

__all__ = ["register"]


def status_command(
    run_id: RunId,
    follow: Annotated[
        bool, typer.Option("--follow", help="Wait for the run to end, showing progress.")
    ] = False,
    as_json: Json = False,
    url: Url = URL_DEFAULT,
) -> None:
    """Show a run's state, progress, statistics, artifacts and failure record."""

    def work(client: ControlClient) -> OpenEnvRunStatus:
        if not follow:
            return client.status(run_id)
        with follow_renderer(True) as show:
            return client.follow(run_id, show)

    status = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(status.to_json())
    else:
        Console().print(status_table(status))
    if follow:
        fail_on_outcome(status, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
