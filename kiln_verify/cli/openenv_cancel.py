"""`kiln-verify openenv cancel RUN_ID`: cooperative cancellation of a queued or active run."""

from __future__ import annotations

import typer

from kiln_verify.cli.control_common import URL_DEFAULT, Json, RunId, Url, echo_json, with_client
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control_client.client import ControlClient

__all__ = ["register"]


def cancel_command(
    run_id: RunId,
    url: Url = URL_DEFAULT,
    as_json: Json = False,
) -> None:
    """Cancel a run: a queued run ends at once, a running one stops at its next boundary."""

    def work(client: ControlClient) -> OpenEnvRunStatus:
        return client.cancel(run_id)

    status = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(status.to_json())
        return
    typer.echo(
        f"run {status.run_id}: {status.state}" + (f" ({status.error})" if status.error else "")
    )


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel_command)
