"""Every command's ``--help`` can be read on a narrow terminal (issue 25, part 5).

The help of every group and command (the whole tree, ``kiln-verify --help`` included) is
rendered through the console script's own ``main()`` at 60, 80 and 120 columns, and read
back as a person would: each option's first column must name all of its flags in full
(``--environment-reset-options FILE``, never ``--environment-rese…``), a boolean flag must
show no metavar (``--thinking / --no-thinking``, never ``<bool>``), every option's help
text must still be there, and a group must list each command's whole summary rather than
a cut one. The layout itself is click's (kiln_verify/cli/help.py says why), so these tests
parse only what any two-column help has: an entry's first column, then its text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
import typer

from kiln_verify.cli import app, main
from kiln_verify.cli.help import command_summary

WIDTHS = (60, 80, 120)


def _commands() -> Iterator[tuple[list[str], Any]]:
    def walk(words: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield words, command
        for name, child in getattr(command, "commands", {}).items():
            yield from walk([*words, name], child)

    yield from walk([], typer.main.get_command(app))


COMMANDS = list(_commands())
IDS = [" ".join(words) or "kiln-verify" for words, _ in COMMANDS]


@pytest.fixture
def render(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """``kiln-verify WORDS --help`` on a terminal ``width`` columns wide, as the console
    script prints it (``main()`` builds only the group named, as it does for a user)."""

    def run(words: list[str], width: int) -> str:
        monkeypatch.setenv("COLUMNS", str(width))
        monkeypatch.setattr(sys, "argv", ["kiln-verify", *words, "--help"])
        code: object = 0
        try:
            main()
        except SystemExit as done:
            code = done.code
        out = capsys.readouterr().out
        assert code == 0, out
        return out

    return run


class Page(NamedTuple):
    command: Any
    width: int
    out: str


@pytest.fixture(
    params=[(words, command, width) for words, command in COMMANDS for width in WIDTHS],
    ids=[f"{name}-{width}" for name in IDS for width in WIDTHS],
)
def page(request: pytest.FixtureRequest, render: Any) -> Page:
    """Every command's help (``COMMANDS``) at every width (``WIDTHS``), rendered."""
    words, command, width = request.param
    return Page(command, width, render(words, width))


def _section(text: str, title: str) -> list[str]:
    """The lines of one ``Title:`` section of a help text."""
    lines = text.splitlines()
    if f"{title}:" not in lines:
        return []
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def _first_columns(section: list[str]) -> list[str]:
    """Each entry's first column: an entry starts two spaces in, and its text starts two
    or more spaces after the first column (or on the next line when that is too long)."""
    heads = []
    for line in section:
        match = re.match(r"^  (\S.*?)(?: {2,}|$)", line)
        if match:
            heads.append(match.group(1))
    return heads


def _flat(text: str) -> str:
    """Text as one line: wrapped lines joined, a word cut at its hyphen made whole."""
    return " ".join(re.sub(r"(?<=\w)-\n\s+", "-", text).split())


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and not p.hidden]


def test_every_option_is_named_in_full(page: Page) -> None:
    command, _, out = page
    assert "…" not in out
    assert "<bool>" not in out.lower()
    assert "boolean" not in out.lower()
    entries = []  # (the flags an entry names, the metavars after them)
    for head in _first_columns(_section(out, "Options")):
        tokens = re.split(r", | / | ", head)
        flags = {token for token in tokens if token.startswith("-")}
        entries.append((flags, [token for token in tokens if token not in flags]))
    for option in _options(command):
        names = {*option.opts, *option.secondary_opts}
        found = [metavars for flags, metavars in entries if flags == names]
        assert len(found) == 1, (sorted(names), out)
        if option.is_flag:
            assert found[0] == [], (sorted(names), found[0], out)
        elif option.metavar is not None:
            assert found[0] == [option.metavar], (sorted(names), found[0], out)
        else:  # typer writes a choice out in full: --invalid-row-policy <fail|skip>
            assert len(found[0]) == 1, (sorted(names), found[0], out)
            assert re.fullmatch(r"<[\w-]+(\|[\w-]+)+>", found[0][0]), (sorted(names), out)


def test_help_keeps_every_description_and_fits(page: Page) -> None:
    command, width, out = page
    flat = _flat(out)
    for option in _options(command):
        assert _flat(option.help or "") in flat, (option.opts, out)
    for name, child in getattr(command, "commands", {}).items():
        assert f"{name} {command_summary(child)}" in flat, (name, out)
        assert not [line for line in out.splitlines() if line.rstrip().endswith("...")
                    and "Usage:" not in line], out  # fmt: skip
    # click writes at most 80 columns (78 of text) and never fewer than 50
    assert max(len(line) for line in out.splitlines()) <= max(min(width, 80), 50), out


def test_the_walk_reaches_every_group_and_the_long_flags() -> None:
    names = {" ".join(words) for words, _ in COMMANDS}
    assert {"", "oracle", "openenv", "hf", "serve", "openenv rollout", "hf export-sft"} <= names
    rollout = next(c for w, c in COMMANDS if w == ["openenv", "rollout"])
    flags = {opt for p in _options(rollout) for opt in p.opts}
    assert {"--environment-reset-options", "--thinking-budget-tokens",
            "--protocol-error-reward", "--capacity-wait-seconds"} <= flags  # fmt: skip


def test_rollout_help_at_80_columns_reads_as_it_should(render: Any) -> None:
    out = render(["openenv", "rollout"], 80)
    lines = out.splitlines()
    # a name too long for the first column keeps its whole self and moves its help down
    row = lines.index("  --environment-reset-options FILE")
    assert lines[row + 1].lstrip().startswith("Per-environment reset FILE")
    assert "  --thinking / --no-thinking  " in out
    assert "  --state-check / --no-state-check" in lines
    assert any(line.startswith("  -h, --help  ") for line in lines)
    root = render([], 80)
    assert any(line.startswith("  --version  ") and "Print the version." in line
               for line in root.splitlines())  # fmt: skip
