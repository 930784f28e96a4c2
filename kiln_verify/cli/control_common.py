"""What `openenv runs|start|status|cancel|artifact` share: options, errors and rendering.

Rendering only: a status becomes a table, a progress bar (on a terminal) or one line per
change (elsewhere), or JSON with ``--json``; a failed or cancelled run becomes its typed
diagnosis (code, stage, retryable, hint) on stderr and exit status 1.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kiln_verify.cli.output import fail
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control_client.client import DEFAULT_URL, ControlClient, outcome_error
from kiln_verify.errors import KilnError

__all__ = [
    "Json",
    "RunId",
    "Url",
    "echo_json",
    "fail_on_outcome",
    "follow_renderer",
    "run_table",
    "status_table",
    "with_client",
]

T = TypeVar("T")

Url = Annotated[
    str,
    typer.Option(
        "--url", metavar="URL", help="Base URL of the control plane (`kiln-verify serve`)."
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print the result (or the error) as JSON.")]
RunId = Annotated[str, typer.Argument(metavar="RUN_ID", help="The run id (a UUID).")]
URL_DEFAULT = DEFAULT_URL


def with_client(url: str, work: Callable[[ControlClient], T], *, as_json: bool = False) -> T:
    """Run ``work`` with a client; a typed error is rendered by :func:`cli.output.fail`
    (JSON on stdout with ``--json``, one stderr line otherwise) with its exit status."""
    try:
        with ControlClient(url) as client:
            return work(client)
    except KilnError as exc:
        fail(exc, as_json=as_json)


def echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _when(unix_ms: int | None) -> str:
    if unix_ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(unix_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def _progress_text(status: OpenEnvRunStatus) -> str:
    p = status.progress
    return (
        f"groups {p.groups_completed}/{p.groups_total}, "
        f"rollouts {p.rollouts_completed}/{p.rollouts_total}"
    )


def status_table(status: OpenEnvRunStatus) -> Table:
    table = Table(title=f"OpenEnv run {status.run_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows: list[tuple[str, str]] = [
        ("state", status.state),
        ("kind", status.kind),
        ("progress", _progress_text(status)),
        ("submitted", _when(status.submitted_unix_ms)),
        ("finished", _when(status.finished_unix_ms)),
    ]
    admission = status.admission
    if admission is not None:
        rows.append(("admission sequence", str(admission.sequence)))
        if admission.queue_position is not None:
            rows.append(("queue position", str(admission.queue_position)))
        if admission.queue_wait_ms is not None:
            rows.append(("queue wait (ms)", str(admission.queue_wait_ms)))
    if status.request.idempotency_key is not None:
        rows.append(("idempotency key", status.request.idempotency_key))
    stats = status.rollout_stats
    if stats is not None:
        rows += [
            ("mean return", f"{stats.mean_episode_return:.6g}"),
            ("min / max return", f"{stats.min_episode_return} / {stats.max_episode_return}"),
            (
                "terminations",
                f"done {stats.done_count}, max_steps {stats.max_steps_count}, "
                f"invalid_model_action {stats.invalid_model_action_count}, "
                f"protocol_error {stats.protocol_error_count}",
            ),
            ("capacity retries", str(stats.capacity_retry_count)),
            ("environment steps", str(stats.total_environment_steps)),
        ]
    for artifact in status.artifacts or ():
        rows.append((f"artifact {artifact.kind}", f"{artifact.bytes} B {artifact.sha256}"))
    failure = status.failure
    if failure is not None:
        rows += [
            ("failure", f"{failure.code} (stage {failure.stage})"),
            ("retryable", "yes (submit a new run)" if failure.retryable else "no"),
            ("message", failure.message),
            ("hint", failure.hint),
        ]
    elif status.error:
        rows.append(("note", status.error))
    for key, value in rows:
        table.add_row(key, value)
    return table


def run_table(runs: list[OpenEnvRunStatus]) -> Table:
    table = Table(title="OpenEnv runs (newest first)")
    for column in ("run id", "state", "kind", "progress", "submitted", "failure"):
        table.add_column(column, overflow="fold")
    for status in runs:
        failure = status.failure.code if status.failure is not None else "-"
        table.add_row(
            status.run_id,
            status.state,
            status.kind,
            _progress_text(status),
            _when(status.submitted_unix_ms),
            failure,
        )
    return table


@contextmanager
def follow_renderer(enabled: bool) -> Iterator[Callable[[OpenEnvRunStatus], None]]:
    """The ``--follow`` display: a rich bar on a terminal, one line per change otherwise
    (on stderr, so ``--json`` output stays machine-readable)."""
    if not enabled:
        yield lambda status: None
        return
    if sys.stderr.isatty():
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            groups = bar.add_task("groups", total=None)
            rollouts = bar.add_task("rollouts", total=None)

            def show(status: OpenEnvRunStatus) -> None:
                p = status.progress
                bar.update(
                    groups,
                    completed=p.groups_completed,
                    total=p.groups_total,
                    description=f"groups ({status.state})",
                )
                bar.update(rollouts, completed=p.rollouts_completed, total=p.rollouts_total)

            yield show
        return
    last: list[str] = []

    def line(status: OpenEnvRunStatus) -> None:
        position = ""
        if status.admission is not None and status.admission.queue_position is not None:
            position = f" (queue position {status.admission.queue_position})"
        text = f"run {status.run_id}: {status.state}{position}, {_progress_text(status)}"
        if not last or last[-1] != text:
            last[:] = [text]
            typer.echo(text, err=True)

    yield line


def fail_on_outcome(status: OpenEnvRunStatus, *, as_json: bool = False) -> None:
    """Exit 1 with the typed diagnosis when a terminal run did not succeed (on stderr: with
    ``--json`` the final status is already on stdout)."""
    error = outcome_error(status)
    if error is not None:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(error.exit_code)


def submit_and_report(
    url: str,
    submit: Callable[[ControlClient], tuple[OpenEnvRunStatus, str]],
    *,
    follow: bool,
    as_json: bool,
) -> None:
    """A command that creates a run (``start``, ``resume``): ``submit`` creates it and says
    what happened; the line goes to stderr under ``--json``; ``--follow`` waits for a
    terminal state, prints its table and exits 1 on a failed or cancelled run."""

    def work(client: ControlClient) -> OpenEnvRunStatus:
        status, what = submit(client)
        if not as_json or follow:
            typer.echo(f"{what} ({status.state})", err=as_json)
        if not follow:
            return status
        with follow_renderer(True) as show:
            return client.follow(status.run_id, show)

    final = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(final.to_json())
    elif follow:
        Console(file=sys.stdout).print(status_table(final))
    if follow:
        fail_on_outcome(final, as_json=as_json)
