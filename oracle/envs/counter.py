"""The counter: the smallest environment that still exercises every part of the protocol.

It mirrors the C99 counter of the pinned oracle that Kiln's interop test drives: an action
with a required integer and an optional string, a float reward (so the float wire shape is
covered), a `done` reached by a rule the client can predict, and a state with one extra key.
It is deliberately not text-profiled: it has no `input_text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from oracle.base import (
    ActionField,
    Environment,
    ExecutionError,
    JsonObject,
    ObservationField,
    Outcome,
    ResetRequest,
)

#: The episode ends as soon as the running total reaches this value...
TARGET = 4
#: ...or after this many steps, so negative amounts cannot make an episode endless.
MAX_STEPS = 16
#: Amounts are bounded so the float reward stays exact (well inside 2**53).
MAX_AMOUNT = 1_000_000


class CounterEnvironment(Environment):
    """Adds `amount` to a running total; the reward is the new total as a float."""

    server_name = "counter"
    env_name = "counter_env"
    class_name = "CounterEnvironment"
    description = (
        "Adds each step's amount to a running total; reward is the total as a float; "
        f"done once the total reaches {TARGET} or after {MAX_STEPS} steps."
    )
    readme = (
        '# counter\n\nStep with `{"amount": <int>, "note": <optional string>}`. '
        f"The total starts at 0; each step adds `amount` (|amount| <= {MAX_AMOUNT}) and the "
        f"reward is the new total as a float. The episode is done when the total is at least "
        f"{TARGET} or after {MAX_STEPS} steps.\n"
    )
    category = "counter"
    action_title = "CounterAction"
    action_fields: ClassVar[tuple[ActionField, ...]] = (
        ActionField("amount", "integer", "Added to the running total."),
        ActionField("note", "string", "Free text, echoed back as last_note.", required=False),
    )
    observation_title = "CounterObservation"
    observation_fields = (
        ObservationField("total", {"type": "integer"}, "The running total."),
        ObservationField("target", {"type": "integer"}, "The total that ends the episode."),
        ObservationField(
            "last_note", {"type": ["string", "null"]}, "The note of the last step, if any."
        ),
    )

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.last_note: str | None = None

    def _observation(self) -> JsonObject:
        return {"total": self.total, "target": TARGET, "last_note": self.last_note}

    def _reset(self, request: ResetRequest) -> Outcome:
        self.total = 0
        self.last_note = None
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        amount = action.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise ExecutionError("amount must be an integer")
        if abs(amount) > MAX_AMOUNT:
            raise ExecutionError(f"amount must be between -{MAX_AMOUNT} and {MAX_AMOUNT}")
        note = action.get("note")
        if note is not None and not isinstance(note, str):
            raise ExecutionError("note must be a string")
        self.total += amount
        self.last_note = note
        done = self.total >= TARGET or self.step_count + 1 >= MAX_STEPS
        return Outcome(self._observation(), float(self.total), done)

    def _extra_state(self) -> JsonObject:
        return {"total": self.total}
