"""The `kiln-verify` command line: argument parsing and rendering only, no contract logic.

Each command group imports its own stack (the OpenEnv client pulls websockets, httpx and
jsonschema; the HF group pulls the export records), and start-up time is part of what a
user pays for `kiln-verify hf verify` on a small bundle. So the console script builds only
the group named on the command line, and the ``openenv`` group only the subcommand named
after it (``openenv verify`` does not load the collector); the full application
(``app``, used by tests and by ``kiln-verify --help``) is built on first access.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import typer

from kiln_verify import __version__


def _oracle_app(subcommand: str | None = None) -> typer.Typer:
    from kiln_verify.cli.oracle_cmd import oracle_app

    return oracle_app


def _openenv_app(subcommand: str | None = None) -> typer.Typer:
    from kiln_verify.cli.openenv_cmd import SUBCOMMANDS, build_openenv_app

    return build_openenv_app(subcommand if subcommand in SUBCOMMANDS else None)


def _hf_app(subcommand: str | None = None) -> typer.Typer:
    from kiln_verify.cli.hf_cmd import hf_app

    return hf_app


def _serve_app(subcommand: str | None = None) -> typer.Typer:
    from kiln_verify.cli.serve_cmd import serve_app

    return serve_app


GROUPS: dict[str, Callable[[str | None], typer.Typer]] = {
    "oracle": _oracle_app,
    "openenv": _openenv_app,
    "hf": _hf_app,
    "serve": _serve_app,
}


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"kiln-verify {__version__}")
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """Conformance and verification for OpenEnv rollouts and the HF/TRL hand-off."""


def build_app(groups: Sequence[str] = tuple(GROUPS), subcommand: str | None = None) -> typer.Typer:
    """The root application with the named command groups attached, in a fixed order;
    ``subcommand``: the one a single group needs (a group may then attach only that one)."""
    root = typer.Typer(
        name="kiln-verify",
        help="Conformance and verification for OpenEnv rollouts and the HF/TRL hand-off.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    root.callback()(_root)
    for name in GROUPS:
        if name in groups:
            root.add_typer(GROUPS[name](subcommand), name=name)
    return root


_FULL: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    global _FULL
    if name == "app":
        if _FULL is None:
            _FULL = build_app()
        return _FULL
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point; usage errors exit 2, contract failures 1."""
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    if first not in GROUPS:
        build_app()()
        return
    second = sys.argv[2] if len(sys.argv) > 2 else None
    build_app([first], second)()
