"""The typer app's click command, built once per scope instead of once per invocation.

``typer.testing.CliRunner.invoke`` turns the typer app into its click command on every
call: ~26 ms of CPU for ``kiln_verify.cli.app``, more than a refused command's own work,
and a property test invokes the CLI once per example. ``kiln-verify`` builds the command
once per process (``kiln_verify.cli._run``); :func:`one_click_command` makes a test scope
do the same. The command is the one a fresh build gives (no state is kept between
invocations: click makes a new context for each), so results do not change.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest
import typer.main
import typer.testing


def one_click_command() -> Iterator[None]:
    """While it runs, ``CliRunner.invoke`` builds each app's click command only once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.testing, "_get_command", functools.cache(typer.main.get_command))
        yield
