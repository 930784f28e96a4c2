"""Pieces shared by the four synthesis tasks (dyna, inducto, logic, filtro).

Each task talks to a policy through one `input_text` string and reads exactly one action
field. This module fixes what they have in common: the observation-field helpers, the
`input_text` layout (title, rules, state, the exact reply line), how an action field is read
(a wrong type or an out-of-range value is an `ExecutionError`: the server answers a
recoverable `EXECUTION_ERROR` and the step is not counted), and the step-before-reset error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from oracle.base import ExecutionError, ObservationField
from oracle.rng import SplitMix64

#: No synthesis episode is longer than this, at any difficulty.
MAX_EPISODE_STEPS = 50

INPUT_TEXT = ObservationField(
    "input_text",
    {"type": "string", "minLength": 1},
    "Rules, the current state and the exact reply format, rendered for a language model.",
)
DIFFICULTY = ObservationField(
    "difficulty", {"type": "integer", "minimum": 1, "maximum": 5}, "Difficulty 1..5."
)


def field(name: str, kind: str, description: str, *, nullable: bool = False) -> ObservationField:
    """A scalar observation field; nullable ones are null until the first step."""
    return ObservationField(name, {"type": [kind, "null"] if nullable else kind}, description)


def list_field(name: str, items: Mapping[str, Any], description: str) -> ObservationField:
    return ObservationField(name, {"type": "array", "items": dict(items)}, description)


def between(rng: SplitMix64, low: int, high: int) -> int:
    """A uniform integer in `[low, high]`."""
    return low + rng.below(high - low + 1)


def read_int(action: Mapping[str, Any], name: str, low: int, high: int) -> int:
    """The integer action field `name`, which must lie in `[low, high]`."""
    value = action.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExecutionError(f"{name} must be an integer between {low} and {high}")
    if not low <= value <= high:
        raise ExecutionError(f"{name} {value} is out of range: choose {low}..{high}")
    return value


def read_str(action: Mapping[str, Any], name: str) -> str:
    value = action.get(name)
    if not isinstance(value, str):
        raise ExecutionError(f"{name} must be a string")
    return value


def not_started() -> ExecutionError:
    return ExecutionError("no episode in progress: send reset before step")


def reply_line(name: str, placeholder: str) -> str:
    """The exact action format, e.g. `Reply with JSON {"label": <0 or 1>} and nothing else.`"""
    return f'Reply with JSON {{"{name}": {placeholder}}} and nothing else.'


def compose(title: str, rules: str, state_lines: Iterable[str], reply: str | None) -> str:
    """`input_text`: title, rules, state, then the reply format (omitted once done)."""
    text = f"{title}\n{rules}\n\n" + "\n".join(state_lines)
    return f"{text}\n\n{reply}" if reply else f"{text}\n\nThe episode is over."
