"""`kiln-verify openenv ...`: inspect an OpenEnv server and list its Task API catalog.

A thin front end over :mod:`kiln_verify.openenv.protocol.client` and
:mod:`kiln_verify.openenv.protocol.tasks`:
parse arguments, run one coroutine, render the typed result as a rich table or as JSON.
Every failure is a typed error printed as code, rule and fix (with the token redacted)
and exits with the error's own status: 1 for a contract or protocol failure, 2 for usage.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from kiln_verify.cli.output import fail
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_TASK_PAGE

if TYPE_CHECKING:
    from kiln_verify.openenv.protocol.client import OpenEnvClient
    from kiln_verify.openenv.protocol.tasks import TaskCatalog

T = TypeVar("T")

_REGISTERED: dict[str, str] = {
    "verify": "kiln_verify.cli.openenv_verify",
    "verify-run": "kiln_verify.cli.openenv_verify_run",
    "rollout": "kiln_verify.cli.openenv_rollout",
    "merge": "kiln_verify.cli.openenv_merge",
    "replay": "kiln_verify.cli.openenv_replay",
    "evaluate": "kiln_verify.cli.openenv_evaluate",
    "runs": "kiln_verify.cli.openenv_runs",
    "preflight": "kiln_verify.cli.openenv_preflight",
    "start": "kiln_verify.cli.openenv_start",
    "status": "kiln_verify.cli.openenv_status",
    "cancel": "kiln_verify.cli.openenv_cancel",
    "resume": "kiln_verify.cli.openenv_resume",
    "artifact": "kiln_verify.cli.openenv_artifact",
    "report": "kiln_verify.cli.openenv_report",
}
"""Subcommands defined in their own modules (each with a ``register(app)``), in help order
after ``inspect`` and ``tasks``."""

SUBCOMMANDS: tuple[str, ...] = ("inspect", "tasks", *_REGISTERED)

_ENVIRONMENT = typer.Option(
    ..., "--environment", metavar="URL", help="Base URL of the OpenEnv server."
)
_CREDENTIAL = typer.Option(
    None,
    "--credential-env",
    metavar="NAME",
    help="NAME of an environment variable holding a bearer token.",
)
_JSON = typer.Option(False, "--json", help="Print the result (or the error) as JSON.")


def _run(
    url: str,
    credential_env: str | None,
    work: Callable[[OpenEnvClient], Awaitable[T]],
    *,
    as_json: bool,
) -> T:
    """Build the client, run ``work``, map typed errors to their exit status."""
    from kiln_verify.openenv.protocol.client import OpenEnvClient

    client: OpenEnvClient | None = None

    async def main() -> T:
        nonlocal client
        client = OpenEnvClient(url, credential_env=credential_env)
        async with client:
            return await work(client)

    try:
        return asyncio.run(main())
    except KilnError as exc:
        fail(exc, as_json=as_json, redact=client.redact if client is not None else None)


def inspect_command(
    environment: str = _ENVIRONMENT,
    credential_env: str | None = _CREDENTIAL,
    as_json: bool = _JSON,
) -> None:
    """Health, discovery and the identity record (kiln.openenv-identity.v1)."""

    async def work(client: OpenEnvClient) -> dict[str, Any]:
        return (await client.inspect()).identity.to_json()

    record = _run(environment, credential_env, work, as_json=as_json)
    if as_json:
        typer.echo(json.dumps(record, indent=2, ensure_ascii=False))
        return
    table = Table(title="OpenEnv environment identity", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key in (
        "base_url",
        "websocket_url",
        "authentication",
        "openapi_version",
        "schema_sha256",
        "discovery_sha256",
    ):
        table.add_row(key, str(record[key]))
    table.add_row("environments", ", ".join(record["environments"]) or "-")
    metadata = record["metadata"]
    for key in ("name", "version", "author", "description"):
        table.add_row(f"metadata.{key}", str(metadata.get(key) or "-"))
    Console().print(table)


def tasks_command(
    environment: str = _ENVIRONMENT,
    environment_name: str | None = typer.Option(
        None,
        "--environment-name",
        metavar="NAME",
        help="Environment to list (default: the only one).",
    ),
    split: str | None = typer.Option(
        None, "--split", metavar="NAME", help="Split to page through."
    ),
    start: int = typer.Option(
        0, "--start", min=0, metavar="INDEX", help="First task index of the page."
    ),
    limit: int = typer.Option(
        50,
        "--limit",
        min=1,
        max=MAX_TASK_PAGE,
        metavar="N",
        help=f"Tasks per page (1..{MAX_TASK_PAGE}).",
    ),
    credential_env: str | None = _CREDENTIAL,
    as_json: bool = _JSON,
) -> None:
    """The Task API catalog: splits and, with --split, one page of (untrusted) task rows."""

    from kiln_verify.openenv.protocol.tasks import task_catalog

    async def work(client: OpenEnvClient) -> TaskCatalog:
        return await task_catalog(client, environment_name, split, start, limit)

    catalog = _run(environment, credential_env, work, as_json=as_json)
    if as_json:
        typer.echo(json.dumps(catalog.to_json(), indent=2, ensure_ascii=False))
        return
    console = Console()
    console.print(
        f"environment [bold]{catalog.environment_name}[/bold]: task API {catalog.task_api}",
        markup=True,
        highlight=False,
    )
    if catalog.splits:
        table = Table(title="splits")
        table.add_column("name")
        table.add_column("type")
        for item in catalog.splits:
            table.add_row(item.name, item.type or "-")
        console.print(table)
    if catalog.tasks is not None:
        rows = Table(
            title=f"{catalog.selected_split}: tasks {catalog.start}..{catalog.stop} "
            f"of {catalog.num_tasks}"
        )
        rows.add_column("index")
        rows.add_column("task (untrusted)", overflow="fold")
        for offset, row in enumerate(catalog.tasks):
            text = json.dumps(row, ensure_ascii=True, sort_keys=True)
            rows.add_row(str((catalog.start or 0) + offset), text[:200])
        console.print(rows, markup=False)


def build_openenv_app(only: str | None = None) -> typer.Typer:
    """The ``openenv`` group; ``only`` names the one subcommand to attach (the console
    script passes the one on its command line), ``None`` attaches all.

    A subcommand's module brings its own stack: ``rollout`` and ``replay`` the collector,
    httpx and websockets, ``evaluate`` the evaluation engine. ``openenv verify`` needs none
    of them, and its start-up time is part of what a user pays per bundle (about 0.37 s
    with all six attached, 0.24 s with verify alone; docs/performance.md).
    """
    app = typer.Typer(
        name="openenv",
        help=(
            "OpenEnv: inspect servers, collect rollout bundles, verify, replay and evaluate them."
        ),
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    if only in (None, "inspect"):
        app.command("inspect")(inspect_command)
    if only in (None, "tasks"):
        app.command("tasks")(tasks_command)
    for name, module in _REGISTERED.items():
        if only in (None, name):
            importlib.import_module(module).register(app)
    return app
