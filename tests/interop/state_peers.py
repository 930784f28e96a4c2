"""An openenv 0.10.0 server whose `state` cannot be read between reset and the first step.

Some environments build their state lazily, in the first `step`; openenv answers a `state`
request whose property raises with `EXECUTION_ERROR` (a recoverable error frame). Such a
server still collects with the hidden-state check turned off (its final state exists),
which is what `tests/interop/test_collect_group_state.py` pins. Kept apart from
`behaviour_peers.py` so that the conformance suite's verdict table over those peers does
not change; served the same way:

    python -m tests.interop.state_peers --exit-on-stdin-eof late-state:4
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

from tests.interop import behaviour_peers, openenv_peers
from tests.interop.behaviour_peers import CountAction, CountObservation

#: What the environment's `state` raises before the first step (openenv echoes it).
NO_STATE_YET = "no state before the first step"


class LateStateEnvironment(Environment):  # type: ignore[misc]
    """A counter whose `State` is created by the first step, as some real games do."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self._state: State | None = None

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CountObservation:
        self.total = 0
        self._state = None
        return CountObservation(total=0, reward=None, done=False)

    def step(
        self, action: CountAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CountObservation:
        if self._state is None:
            self._state = State(episode_id=None, step_count=0)
        self._state.step_count += 1
        self.total += action.amount
        return CountObservation(
            total=self.total, reward=float(self.total), done=self._state.step_count >= 2
        )

    @property
    def state(self) -> State:
        if self._state is None:
            raise RuntimeError(NO_STATE_YET)
        return self._state


STATE_PEERS = {
    "late-state": behaviour_peers._limited(
        LateStateEnvironment, CountAction, CountObservation, "late_state_env"
    ),
}


if __name__ == "__main__":
    raise SystemExit(openenv_peers.main_with(STATE_PEERS, sys.argv[1:]))
