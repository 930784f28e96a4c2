"""The `kiln-verify` command line: argument parsing and rendering only, no contract logic."""

from __future__ import annotations

import typer

from kiln_verify import __version__
from kiln_verify.cli.hf_cmd import hf_app
from kiln_verify.cli.openenv_cmd import openenv_app
from kiln_verify.cli.oracle_cmd import oracle_app

app = typer.Typer(
    name="kiln-verify",
    help="Conformance and verification for OpenEnv rollouts and the HF/TRL hand-off.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(oracle_app, name="oracle")
app.add_typer(openenv_app, name="openenv")
app.add_typer(hf_app, name="hf")


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"kiln-verify {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """Conformance and verification for OpenEnv rollouts and the HF/TRL hand-off."""


def main() -> None:
    """Console-script entry point; usage errors exit 2, contract failures 1."""
    app()
