"""`kiln-verify oracle ...`: list the conformance oracle's servers and run one of them.

A thin front end over `oracle.inventory` and `oracle.runner`: argument parsing, usage
errors (exit 2) and rendering only. Environment modules are imported lazily, one per row,
so a broken or missing game module shows up as one unavailable row instead of breaking
the whole command.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from oracle.context import DEFAULT_MAX_SESSIONS
from oracle.faults import FAULT_NAMES, FaultError, parse_faults
from oracle.inventory import ALL_SERVERS, SERVERS, environment_class
from oracle.runner import ServerConfig, ServerHandle, serve_forever

oracle_app = typer.Typer(
    name="oracle",
    help="The conformance oracle: small deterministic OpenEnv servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
_FAULT_HELP = f"Fault profile NAME[=VALUE], repeatable: {', '.join(FAULT_NAMES)}."


def inventory_rows() -> list[dict[str, Any]]:
    """One row per server in serving order; `available` is False if its module fails."""
    rows: list[dict[str, Any]] = []
    for name in SERVERS:
        try:
            env = environment_class(name)
        except Exception as exc:
            rows.append({"name": name, "available": False, "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows.append(
            {
                "name": name,
                "available": True,
                "category": env.category,
                "env_name": env.env_name,
                "class_name": env.class_name,
                "action": [
                    {"name": f.name, "type": f.type, "required": f.required}
                    for f in env.action_fields
                ],
                "task_api": env.task_splits() is not None,
            }
        )
    return rows


@oracle_app.command("list")
def list_servers(
    as_json: bool = typer.Option(False, "--json", help="Print the inventory as JSON."),
) -> None:
    """List the oracle servers: name, category, env_name, action field(s), Task API."""
    rows = inventory_rows()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console  # only `list` renders; `serve` starts without rich
    from rich.table import Table

    table = Table(title="kiln-verify oracle servers")
    for column in ("name", "category", "env_name", "action", "task API"):
        table.add_column(column)
    for row in rows:
        if not row["available"]:
            table.add_row(row["name"], "-", "-", f"unavailable ({row['error']})", "-")
            continue
        action = ", ".join(
            f"{f['name']}: {f['type']}{'' if f['required'] else '?'}" for f in row["action"]
        )
        table.add_row(
            row["name"],
            row["category"],
            row["env_name"],
            action,
            "yes" if row["task_api"] else "no",
        )
    Console().print(table)


@oracle_app.command("serve")
def serve(
    name: str = typer.Argument(..., help="Server name (see `kiln-verify oracle list`)."),
    host: str = typer.Option("127.0.0.1", "--host", metavar="HOST", help="Address to listen on."),
    port: int = typer.Option(
        0, "--port", metavar="PORT", min=0, max=65535, help="Port; 0 picks a free one."
    ),
    max_sessions: int = typer.Option(
        DEFAULT_MAX_SESSIONS,
        "--max-sessions",
        metavar="N",
        min=1,
        help="Concurrent WebSocket sessions before CAPACITY_REACHED.",
    ),
    fault: Annotated[
        list[str] | None, typer.Option("--fault", metavar="PROFILE", help=_FAULT_HELP)
    ] = None,
    ping_interval: float = typer.Option(
        20.0,
        "--ping-interval",
        metavar="SECONDS",
        min=0.0,
        help="Seconds between server WebSocket pings (0 disables them).",
    ),
    ping_timeout: float = typer.Option(
        20.0,
        "--ping-timeout",
        metavar="SECONDS",
        min=0.0,
        help="Seconds to wait for a pong before dropping.",
    ),
    per_message_deflate: bool = typer.Option(
        False,
        "--per-message-deflate/--no-per-message-deflate",
        help="Accept permessage-deflate when a client offers it (OpenEnv does; off is faster).",
    ),
) -> None:
    """Run one oracle server in the foreground; prints its base URL once /health answers."""
    if name not in ALL_SERVERS:
        raise typer.BadParameter(
            f"unknown oracle server {name!r}; run `kiln-verify oracle list` for the names "
            f"(MCP tool environments: {', '.join(ALL_SERVERS[len(SERVERS) :])})",
            param_hint="NAME",
        )
    try:
        faults = parse_faults(fault or ())
        faults.bearer_token()
    except FaultError as exc:
        raise typer.BadParameter(str(exc), param_hint="--fault") from None
    config = ServerConfig(
        name,
        host=host,
        port=port,
        max_sessions=max_sessions,
        faults=faults,
        ping_interval=ping_interval or None,
        ping_timeout=ping_timeout or None,
        per_message_deflate=per_message_deflate,
    )
    try:
        config.environment_class()
    except Exception as exc:
        typer.echo(f"error: oracle server {name!r} cannot be loaded: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        serve_forever(config, on_ready=_announce)
    except OSError as exc:
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None


def _announce(handle: ServerHandle) -> None:
    sys.stdout.write(handle.base_url + "\n")
    sys.stdout.flush()
