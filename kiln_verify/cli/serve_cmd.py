"""`kiln-verify serve`: the control plane (server-owned rollout runs) on uvicorn.

With no ``--config`` it listens on loopback port 8420, keeps its state in
``$XDG_STATE_HOME/kiln-verify`` (``~/.local/state/kiln-verify``), accepts loopback
environment URLs only and plays adapter ``base`` with the ``random`` policy. ``--host``,
``--port`` and ``--state-dir`` override the file's ``[server]`` table; ``--model DIR``
makes ``DIR`` the resident model (``[model].path``; docs/resident-model.md), loaded when a
run first needs it. Once listening it
prints one line naming the URL and the state directory; SIGINT or SIGTERM stop it (runs
that were active fail with ``run_interrupted`` at the next start).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated

import typer

from kiln_verify.errors import KilnError

__all__ = ["serve_app"]

serve_app = typer.Typer(
    name="serve",
    help="Serve the control plane: server-owned OpenEnv rollout runs over HTTP.",
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@serve_app.callback(invoke_without_command=True)
def serve_command(
    config: Annotated[
        str | None,
        typer.Option("--config", metavar="FILE", help="TOML server configuration file."),
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", metavar="HOST", help="Listen address.")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", metavar="PORT", min=0, max=65535, help="Listen port (0: any free)."),
    ] = None,
    state_dir: Annotated[
        str | None,
        typer.Option("--state-dir", metavar="DIR", help="Directory holding .openenv/runs/."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            metavar="DIR",
            help="Local Hugging Face model directory: the resident model that plays adapter "
            "'base' and every installed adapter (overrides [model].path).",
        ),
    ] = None,
) -> None:
    """Serve the control plane until interrupted."""
    from kiln_verify.control.config import load_config
    from kiln_verify.control.sections.model import model_settings
    from kiln_verify.control.store import RunStore
    from kiln_verify.openenv.protocol.urls import is_loopback_host
    from kiln_verify.server.runner import serve_forever

    try:
        settings = load_config(config)
    except KilnError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    settings = dataclasses.replace(
        settings,
        host=settings.host if host is None else host,
        port=settings.port if port is None else port,
        state_dir=settings.state_dir if state_dir is None else Path(state_dir),
    )
    if model is not None:
        try:
            settings = dataclasses.replace(settings, model=model_settings(settings.model, model))
        except KilnError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None

    def ready(url: str) -> None:
        resident = "" if settings.model is None else f", model {settings.model.path}"
        print(
            f"kiln-verify serve: listening on {url} (state {settings.state_dir}{resident})",
            flush=True,
        )

    if not is_loopback_host(settings.host):
        typer.echo(
            f"warning: listening on {settings.host}: the control plane has no authentication "
            "of its own; expose it only behind an authenticating proxy or on a trusted network",
            err=True,
        )

    try:
        RunStore(settings.runs_root)  # created and checked before anything listens
    except (OSError, KilnError) as exc:
        detail = exc.rule if isinstance(exc, KilnError) else exc.strerror
        typer.echo(
            f"error: cannot use the state directory {settings.state_dir}: {detail}", err=True
        )
        raise typer.Exit(1) from None
    try:
        if not serve_forever(settings, ready):
            typer.echo("error: the control plane failed to start (see above)", err=True)
            raise typer.Exit(1)
    except OSError as exc:
        typer.echo(
            f"error: cannot listen on {settings.host}:{settings.port}: {exc.strerror}", err=True
        )
        raise typer.Exit(1) from None
    except KilnError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    sys.stdout.flush()
