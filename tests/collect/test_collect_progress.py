"""The rollout progress bar: on a terminal it shows finished groups and episodes."""

from __future__ import annotations

import io
import re
import types
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kiln_verify.cli import app, openenv_rollout
from oracle.runner import ServerHandle

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, *, terminal: bool
) -> tuple[Any, str]:
    screen = io.StringIO()
    fake_stderr = types.SimpleNamespace(isatty=lambda: terminal)
    monkeypatch.setattr(openenv_rollout, "sys", types.SimpleNamespace(stderr=fake_stderr))

    def console(*args: Any, stderr: bool = False, **kwargs: Any) -> Console:
        if not stderr:
            return Console(*args, **kwargs)
        return Console(file=screen, force_terminal=True, width=120, color_system=None)

    monkeypatch.setattr(openenv_rollout, "Console", console)
    args = ["openenv", "rollout", "--environment", url, "--groups", "3", "--group-size", "2"]
    args += ["--max-steps", "2", "--output", str(tmp_path / "d.jsonl")]
    args += ["--replay-output", str(tmp_path / "r.json")]
    args += ["--summary-output", str(tmp_path / "s.json")]
    result = CliRunner().invoke(app, args)
    return result, _ANSI.sub("", screen.getvalue())


def test_terminal_shows_group_and_episode_counts(
    servers: dict[str, ServerHandle], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, shown = _run(monkeypatch, tmp_path, servers["counter"].base_url, terminal=True)
    assert result.exit_code == 0, result.output
    lines = shown.replace("\r", "\n").splitlines()
    assert any(re.match(r"^groups\b.* 3/3 ", line) for line in lines), shown
    assert any(re.match(r"^episodes\b.* 6/6 ", line) for line in lines), shown


def test_no_terminal_no_progress(
    servers: dict[str, ServerHandle], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, shown = _run(monkeypatch, tmp_path, servers["counter"].base_url, terminal=False)
    assert result.exit_code == 0, result.output
    assert shown == ""
