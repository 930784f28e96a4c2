"""`kiln-verify adapters list`: the adapters a running server holds (`GET /v1/adapters`).

Named as Kiln names it (``kiln adapters list``). Kiln's ``load``, ``unload`` and ``delete``
have no counterpart: each run names its own adapter, and adapters enter only through the
verified import of a training run (docs/resident-model.md). A server without a resident
model answers ``model_not_loaded``, reported with its hint and exit status 1.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from kiln_verify.cli.control_common import URL_DEFAULT, Json, Url, echo_json, with_client
from kiln_verify.control.resident.records import AdaptersResponse
from kiln_verify.control_client.client import ControlClient

__all__ = ["adapters_app"]

adapters_app = typer.Typer(
    name="adapters",
    help="The adapters of a running `kiln-verify serve --model` server.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _table(listing: AdaptersResponse) -> Table:
    table = Table(title=f"adapters in {listing.adapter_dir}")
    for column in ("name", "status", "bytes", "rank", "alpha", "adapter_model sha256", "error"):
        table.add_column(column, overflow="fold")
    for entry in listing.available:
        table.add_row(
            entry.name,
            entry.status,
            str(entry.size_bytes),
            "-" if entry.rank is None else str(entry.rank),
            "-" if entry.alpha is None else f"{entry.alpha:g}",
            entry.adapter_model_sha256 or "-",
            entry.error or entry.last_load_error or "",
        )
    return table


@adapters_app.command("list")
def list_command(url: Url = URL_DEFAULT, as_json: Json = False) -> None:
    """List the server's installed adapters (Kiln's AdaptersResponse)."""

    def work(client: ControlClient) -> AdaptersResponse:
        return client._json(AdaptersResponse, "GET", "/v1/adapters")[0]

    listing = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(listing.to_json())
        return
    if not listing.available:
        typer.echo(f"no adapters installed in {listing.adapter_dir}")
        return
    Console().print(_table(listing))
