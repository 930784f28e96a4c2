"""What every command prints when it fails, and the conventions all commands share.

One place for the error rendering so that every command with ``--json`` answers a
failure with ``{"error": {...}}`` on stdout (the same object a typed error's
``to_dict`` gives), and every other failure with one ``error: ...`` line on stderr; the
exit status is the error's own (1 contract failure, 2 usage, 130 interrupted). Peer
text can carry a credential only through a peer's reflection, which the client refuses,
but a caller that holds a token passes its ``redact`` anyway: nothing printed may ever
contain one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from kiln_verify.errors import KilnError

__all__ = ["CONTEXT_SETTINGS", "fail", "flag_name", "flag_text", "print_json", "usage_error_json"]

#: Shared by the root application (click passes them down to every group and command).
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


#: Fields whose flag is not the mechanical ``--`` + the field name with dashes.
_FLAGS = {
    "environments": "--environment",
    "credential_envs": "--credential-env",
    "reset_templates": "--reset-options/--environment-reset-options",
}


def flag_name(field: str) -> str:
    """The command-line flag of a contract field (``group_size`` -> ``--group-size``)."""
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def flag_text(text: str, fields: tuple[str, ...]) -> str:
    """``text`` with each of the contract ``fields`` it names (in backticks, as engine
    errors spell them) shown as its flag; nothing else in the text is touched."""
    for field in fields:
        text = text.replace(f"`{field}`", flag_name(field))
    return text


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item, redact) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item, redact) for item in value]
    return value


def print_json(document: Any, *, sort_keys: bool = False) -> None:
    """One JSON document on stdout, indented, UTF-8 kept readable."""
    typer.echo(json.dumps(document, indent=2, ensure_ascii=False, sort_keys=sort_keys))


def fail(
    exc: KilnError,
    *,
    as_json: bool,
    redact: Callable[[str], str] | None = None,
    extra_lines: list[str] | None = None,
) -> NoReturn:
    """Render ``exc`` (JSON on stdout with ``--json``, else stderr) and exit with its code."""
    clean = redact or (lambda text: text)
    exc.rule = flag_text(exc.rule, exc.fields)
    exc.hint = flag_text(exc.hint, exc.fields) if exc.hint is not None else None
    if as_json:
        print_json({"error": _redacted(exc.to_dict(), clean)})
    else:
        typer.echo(f"error: {clean(str(exc))}", err=True)
        for line in extra_lines or ():
            typer.echo(clean(line), err=True)
    raise typer.Exit(exc.exit_code)


def usage_error_json(message: str, hint: str | None) -> str:
    """A click usage error (unknown flag, bad choice) as the same JSON error object."""
    error: dict[str, Any] = {"code": "usage", "rule": message}
    if hint:
        error["hint"] = hint
    return json.dumps({"error": error}, indent=2, ensure_ascii=False)
