"""`kiln-verify openenv start --request FILE`: submit a server-owned run, optionally follow it.

The file is one JSON object (at most 1 MiB, a regular non-symlink file); the server
validates it as ``OpenEnvRunRequest``. ``--idempotency-key`` is inserted into it (and may
not disagree with a key already there): retrying with the same key and file returns the
original run instead of starting another. With ``--follow`` the command waits for a
terminal state and exits 1 with the typed diagnosis if the run failed or was cancelled.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kiln_verify.cli.control_common import (
    URL_DEFAULT,
    Json,
    Url,
    submit_and_report,
)
from kiln_verify.cli.output import fail
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control_client.client import ControlClient, load_run_request
from kiln_verify.errors import KilnError

__all__ = ["register"]


def start_command(
    request: Annotated[
        str,
        typer.Option(
            "--request", metavar="FILE", help="JSON file holding one OpenEnvRunRequest object."
        ),
    ],
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            metavar="KEY",
            help="Retry-safe key (never a secret; 1..128 chars).",
        ),
    ] = None,
    url: Url = URL_DEFAULT,
    follow: Annotated[
        bool, typer.Option("--follow", help="Wait for the run to end, showing progress.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Start a rollout run on the control plane (202 new, 200 the original of a retry)."""
    try:
        body = load_run_request(request, idempotency_key)
    except KilnError as exc:
        fail(exc, as_json=as_json)

    def submit(client: ControlClient) -> tuple[OpenEnvRunStatus, str]:
        status, created = client.start(body)
        what = "started run" if created else "existing run (idempotent retry)"
        return status, f"{what} {status.run_id}"

    submit_and_report(url, submit, follow=follow, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command("start")(start_command)
