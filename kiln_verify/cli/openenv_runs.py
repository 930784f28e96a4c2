"""`kiln-verify openenv runs`: the control plane's retained runs, newest first."""

from __future__ import annotations

import typer
from rich.console import Console

from kiln_verify.cli.control_common import URL_DEFAULT, Json, Url, echo_json, run_table, with_client
from kiln_verify.control.status import RunList
from kiln_verify.control_client.client import ControlClient

__all__ = ["register"]


def runs_command(url: Url = URL_DEFAULT, as_json: Json = False) -> None:
    """List the server's retained runs (kiln.openenv-run-list.v5)."""

    def work(client: ControlClient) -> RunList:
        return client.runs()

    listing = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(listing.to_json())
        return
    Console().print(run_table(listing.runs))


def register(app: typer.Typer) -> None:
    app.command("runs")(runs_command)
