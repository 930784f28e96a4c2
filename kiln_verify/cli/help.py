"""How every command's ``--help`` is laid out: click's plain two-column help, with each
group's command list wrapped rather than cut.

Not typer's rich panels, for two faults seen on an 80-column terminal. The panels lay an
option out in a table of fixed columns (long name, short name, negative name, type, help)
that rich narrows to the terminal by cutting cells with an ellipsis, so the longest names
came out cut (``--environment-rese…``, ``--capacity-wait-se…``) beside a help column about
twenty characters wide. And typer 0.29 fills a boolean flag's type column with ``<bool>``
(``--version <bool>``, ``--thinking --no-thinking <bool>``), which reads as if the flag
took a value. click's own formatter, which typer uses when ``rich_markup_mode`` is None,
never cuts a name (a name longer than its column gets its help on the next line), writes
``--thinking / --no-thinking`` as one entry with no metavar, and needs no private typer
code, so it holds across the typer releases the project admits. What it costs is colour.
The console script already printed usage errors with click's plain ``show()``; now help
and errors look alike there and under typer's test runner.

The one thing click does worse is a group's command list: it cuts each summary to what
fits on one line, with ``...``. :class:`HelpGroup` lists the first paragraph of each
command's help instead, wrapped like an option's help. The root application sets both
(:data:`APP_SETTINGS`) and passes the group class to every group it attaches; the leaf
commands inherit the markup mode from the root, so no command declares anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typer.core import TyperGroup

__all__ = ["APP_SETTINGS", "HelpGroup", "command_summary", "one_of"]


def one_of(names: Iterable[str]) -> str:
    """``a, b or c``: a list of choices in an option's help. Not ``a|b|c``, which is one
    word to the wrapper, so a narrow terminal would cut it mid-name."""
    *head, last = names
    return f"{', '.join(head)} or {last}" if head else last


def command_summary(command: Any) -> str:
    """What a group's command list says about ``command``: its ``short_help``, else the
    first paragraph of its help (before click's ``\\f`` cut), on one line."""
    text = command.short_help or (command.help or "").split("\f", 1)[0].split("\n\n", 1)[0]
    summary = " ".join(text.replace("\b", "").split())
    if command.deprecated:
        summary = f"{summary} (deprecated)".strip()
    return summary


class HelpGroup(TyperGroup):
    """A typer group whose ``--help`` lists each command with its whole summary."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:  # typer's vendored click
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command_summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


#: The root application's help settings (:func:`kiln_verify.cli.build_app`).
APP_SETTINGS: dict[str, Any] = {"cls": HelpGroup, "rich_markup_mode": None}
