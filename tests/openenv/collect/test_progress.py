"""Rollout progress: a bar on a terminal, plain lines at most every few seconds off one."""

from __future__ import annotations

import io
import re
import types
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kiln_verify.cli import app, openenv_rollout, progress
from kiln_verify.openenv.collect import ProgressEvent
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

    monkeypatch.setattr(progress, "Console", console)
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


def test_off_a_terminal_a_line_is_printed_when_one_is_due(
    servers: dict[str, ServerHandle], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "PROGRESS_LINE_INTERVAL_S", 0.0)
    result, shown = _run(monkeypatch, tmp_path, servers["counter"].base_url, terminal=False)
    assert result.exit_code == 0, result.output
    assert shown == ""  # no bar
    lines = [line for line in result.stderr.splitlines() if line.startswith("rollout: ")]
    assert lines, result.stderr
    assert re.fullmatch(r"rollout: 3/3 groups, 6/6 episodes, \d+ s elapsed", lines[-1])


def test_progress_lines_are_rate_limited() -> None:
    now = [0.0]
    sink = io.StringIO()
    tracker = progress.CollectionProgress(
        "rollout", 4, 8, clock=lambda: now[0], stream=sink, interval=5.0
    )
    events = [
        ProgressEvent("episode", 1, 8),
        ProgressEvent("episode", 2, 8),
        ProgressEvent("group", 1, 4),
        ProgressEvent("episode", 3, 8),
    ]
    for second, event in enumerate(events):
        now[0] = 3.0 * (second + 1)  # 3, 6, 9, 12 s
        tracker.lines_hook(event)
    assert sink.getvalue().splitlines() == [
        "rollout: 0/4 groups, 2/8 episodes, 6 s elapsed",
        "rollout: 1/4 groups, 3/8 episodes, 12 s elapsed",
    ]


def test_two_collections_count_on_from_each_other() -> None:
    tracker = progress.CollectionProgress("evaluate", 4, 4, interval=1e9)
    stages: list[tuple[Any, int]] = [("group", 2), ("episode", 2), ("publishing", 0),
                                      ("published", 0), ("group", 1), ("episode", 1)]  # fmt: skip
    for stage, completed in stages:
        tracker.record(ProgressEvent(stage, completed, 2))
    assert (tracker.done_groups, tracker.done_episodes, tracker.published) == (3, 3, 1)
    rule = tracker.interrupted("SIGTERM", "eval/baseline").rule
    assert rule == (
        "evaluate stopped by SIGTERM after 3 of 4 groups had completed; 1 bundle(s) had been "
        "published before it (eval/baseline)"
    )
