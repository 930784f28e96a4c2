"""Command-line conventions every command keeps (walked over the whole command tree).

``-h`` everywhere, ``--version``, shell completion that answers, readable metavars (no
``<list[str]>`` or ``<int>``, none on a flag), boolean switches as ``--x/--no-x`` rather
than a ``true|false`` string, and on every command that has ``--json`` a usage error is
printed as the same JSON error object as any other failure. The help layout itself
(whole flag names at 60, 80 and 120 columns) is tests/cli/test_help_layout.py's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from kiln_verify import __version__
from kiln_verify.cli import app, main

_UNREADABLE = ("<list[", "<str>", "<int>", "<float>", "<path>", "<optional", "<bool>", "boolean")


def _commands() -> Iterator[tuple[list[str], Any]]:
    root = typer.main.get_command(app)

    def walk(words: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield words, command
        for name, child in sorted(getattr(command, "commands", {}).items()):
            yield from walk([*words, name], child)

    yield from walk([], root)


COMMANDS = list(_commands())
LEAVES = [(words, command) for words, command in COMMANDS if not hasattr(command, "commands")]


class Ran:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """The console script's ``main()`` in this process (as the entry point runs it)."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str, env: dict[str, str] | None = None) -> Ran:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setattr(sys, "argv", ["kiln-verify", *args])
        code = 0
        try:
            main()
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        captured = capsys.readouterr()
        for key in env or {}:
            monkeypatch.delenv(key)
        return Ran(code, captured.out, captured.err)

    return run


def test_the_tree_has_every_command() -> None:
    names = {" ".join(words) for words, _ in LEAVES}
    assert {"openenv rollout", "openenv verify", "openenv evaluate", "hf verify",
            "oracle serve"} <= names  # fmt: skip


@pytest.mark.parametrize("words", [w for w, _ in COMMANDS], ids=lambda w: " ".join(w) or "root")
def test_dash_h_is_help_everywhere(run_main: Any, words: list[str]) -> None:
    result = run_main(*words, "-h")
    assert result.returncode == 0, result.stderr
    assert "Usage: kiln-verify" in result.stdout
    # Option rows show the metavar in place of the type (arguments keep typer's type column).
    options = [line for line in result.stdout.splitlines() if line.lstrip("│ *").startswith("--")]
    for marker in _UNREADABLE:
        assert not [line for line in options if marker in line.lower()], (marker, result.stdout)
    assert "true|false" not in result.stdout


def test_version(run_main: Any) -> None:
    result = run_main("--version")
    assert result.stdout.strip() == f"kiln-verify {__version__}"


def test_shell_completion_answers(run_main: Any) -> None:
    env = {"_KILN_VERIFY_COMPLETE": "complete_bash", "COMP_WORDS": "kiln-verify openenv roll",
           "COMP_CWORD": "2"}  # fmt: skip
    assert run_main(env=env).stdout.split() == ["rollout"]
    env["COMP_WORDS"], env["COMP_CWORD"] = "kiln-verify openenv rollout --no-th", "3"
    assert run_main(env=env).stdout.split() == ["--no-thinking"]


JSON_LEAVES = [
    words for words, command in LEAVES if any("--json" in p.opts for p in command.params)
]


@pytest.mark.parametrize("words", JSON_LEAVES, ids=lambda w: " ".join(w))
def test_json_usage_errors_are_json(run_main: Any, words: list[str]) -> None:
    result = run_main(*words, "--json", "--no-such-flag")
    assert result.returncode == 2, result
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "usage"
    assert "--no-such-flag" in error["rule"]


def test_boolean_switches_have_a_negative_form() -> None:
    command = next(c for w, c in LEAVES if w == ["openenv", "rollout"])
    thinking = next(p for p in command.params if p.name == "thinking")
    assert thinking.opts == ["--thinking"]
    assert thinking.secondary_opts == ["--no-thinking"]
