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

from kiln_verify._version import __version__


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


def _adapters_app(subcommand: str | None = None) -> typer.Typer:
    from kiln_verify.cli.adapters_cmd import adapters_app

    return adapters_app


GROUPS: dict[str, Callable[[str | None], typer.Typer]] = {
    "oracle": _oracle_app,
    "openenv": _openenv_app,
    "hf": _hf_app,
    "serve": _serve_app,
    "adapters": _adapters_app,
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
    from kiln_verify.cli.help import APP_SETTINGS, HelpGroup
    from kiln_verify.cli.output import CONTEXT_SETTINGS

    root = typer.Typer(
        name="kiln-verify",
        help="Conformance and verification for OpenEnv rollouts and the HF/TRL hand-off.",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        context_settings=CONTEXT_SETTINGS,
        **APP_SETTINGS,  # click's plain help layout, inherited by every command
    )
    root.callback()(_root)
    for name in GROUPS:
        if name in groups:
            root.add_typer(GROUPS[name](subcommand), name=name, cls=HelpGroup)
    return root


_FULL: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    global _FULL
    if name == "app":
        if _FULL is None:
            _FULL = build_app()
        return _FULL
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run(app: typer.Typer, argv: list[str]) -> None:
    """Run ``app``; with ``--json`` on the command line a usage error the argument parser
    itself raises (unknown flag, bad choice, missing option) is printed as the JSON error
    object too."""
    from typer.exceptions import TyperException

    from kiln_verify.cli.output import usage_error_json

    command = typer.main.get_command(app)
    try:
        # Without standalone mode an Exit raised inside a command comes back as the result.
        status = command.main(args=argv, prog_name="kiln-verify", standalone_mode=False)
        if isinstance(status, int) and status != 0:
            sys.exit(status)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.Abort:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except TyperException as exc:  # typer's own click: UsageError and its kin
        code = int(getattr(exc, "exit_code", 2))
        if "--json" in argv and code == 2 and hasattr(exc, "format_message"):
            words = " ".join(a for a in argv[:2] if not a.startswith("-"))
            typer.echo(usage_error_json(exc.format_message(), f"see kiln-verify {words} -h"))
        else:
            exc.show()  # type: ignore[attr-defined]
        sys.exit(code)


def main() -> None:
    """Console-script entry point; usage errors exit 2, contract failures 1."""
    argv = sys.argv[1:]
    first = argv[0] if argv else ""
    if first not in GROUPS:
        _run(build_app(), argv)
        return
    second = argv[1] if len(argv) > 1 else None
    _run(build_app([first], second), argv)
