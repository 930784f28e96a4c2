"""Shared pieces of the ten text-profile games (games only: not counter, synthesis or math).

Every game talks to a language model through one `input_text` string and reads one action
field. Keeping the layout of that text, the reading of the action and the common observation
fields in one place means the ten games cannot drift apart in the details a policy (or a
conformance test) relies on: the exact "Reply with JSON ..." line, the type checks, and
what an out-of-range action does (always `ExecutionError`, which the server answers with a
recoverable `EXECUTION_ERROR`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oracle.base import ExecutionError, ObservationField

#: Upper bound on the number of steps in any game episode, whatever the difficulty.
MAX_EPISODE_STEPS = 200

INPUT_TEXT = ObservationField(
    "input_text",
    {"type": "string", "minLength": 1},
    "Rules, the current state and the exact reply format, rendered for a language model.",
)


def int_field(
    name: str, description: str, *, minimum: int | None = None, nullable: bool = False
) -> ObservationField:
    """An integer observation field; nullable ones are null until the first step."""
    schema: dict[str, Any] = {"type": ["integer", "null"] if nullable else "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    return ObservationField(name, schema, description)


def str_field(name: str, description: str, *, nullable: bool = False) -> ObservationField:
    return ObservationField(
        name, {"type": ["string", "null"] if nullable else "string"}, description
    )


def bool_field(name: str, description: str, *, nullable: bool = False) -> ObservationField:
    return ObservationField(
        name, {"type": ["boolean", "null"] if nullable else "boolean"}, description
    )


def list_field(name: str, items: Mapping[str, Any], description: str) -> ObservationField:
    return ObservationField(name, {"type": "array", "items": dict(items)}, description)


def legal_actions_field(item_type: str, description: str) -> ObservationField:
    """`legal_actions`: the values of the action field that `step` accepts right now."""
    return list_field("legal_actions", {"type": item_type}, description)


def read_int(action: Mapping[str, Any], name: str, low: int, high: int) -> int:
    """The integer action field `name`, which must lie in `[low, high]`."""
    value = action.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExecutionError(f"{name} must be an integer between {low} and {high}")
    if not low <= value <= high:
        raise ExecutionError(f"{name} {value} is out of range: choose {low}..{high}")
    return value


def read_choice(action: Mapping[str, Any], name: str, choices: Sequence[str]) -> str:
    """The string action field `name`, case- and whitespace-insensitive, one of `choices`."""
    value = action.get(name)
    if not isinstance(value, str):
        raise ExecutionError(f"{name} must be a string, one of {', '.join(choices)}")
    cleaned = value.strip().lower()
    if cleaned not in choices:
        raise ExecutionError(f"{name} {value[:40]!r} is not one of {', '.join(choices)}")
    return cleaned


def not_started() -> ExecutionError:
    """The error for a step sent before the first reset of a session."""
    return ExecutionError("no episode in progress: send reset before step")


def reply_line(name: str, placeholder: str) -> str:
    """The exact action format, e.g. `Reply with JSON {"arm": <0-9>}`."""
    return f'Reply with JSON {{"{name}": {placeholder}}} and nothing else.'


def compose(title: str, rules: str, state_lines: Iterable[str], reply: str) -> str:
    """The `input_text` layout every game uses: rules, state, then the reply format."""
    state = "\n".join(state_lines)
    return f"{title}\n{rules}\n\n{state}\n\n{reply}"
