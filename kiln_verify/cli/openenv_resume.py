"""`kiln-verify openenv resume RUN_ID`: a new attempt at a run interrupted by a restart.

A kiln-verify extension (Kiln has no resume): ``POST /v1/openenv/runs/{id}/resume``
creates a new run with the interrupted run's exact request, continuing its journal
(docs/resume-and-shards.md, "Server-owned runs"). With ``--follow`` the command waits for
a terminal state and exits 1 with the typed diagnosis if the new run failed or was
cancelled.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kiln_verify.cli.control_common import (
    URL_DEFAULT,
    Json,
    RunId,
    Url,
    submit_and_report,
)
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control_client.client import ControlClient

__all__ = ["register"]


def resume_command(
    run_id: RunId,
    url: Url = URL_DEFAULT,
    follow: Annotated[
        bool, typer.Option("--follow", help="Wait for the new run to end, showing progress.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Resume a rollout run failed with run_interrupted as a new run (kiln-verify's own)."""

    def submit(client: ControlClient) -> tuple[OpenEnvRunStatus, str]:
        status = client.resume(run_id)
        return status, f"resumed run {run_id} as run {status.run_id}"

    submit_and_report(url, submit, follow=follow, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command("resume")(resume_command)
