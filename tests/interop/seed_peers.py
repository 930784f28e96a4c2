"""openenv 0.10.0 servers that ignore what a reset asks for, as OpenEnv's example servers do.

Real deployments on openenv 0.10.0 (chess_env, openspiel catch, textarena GuessTheNumber)
ignore the reset `seed`, and many more (connect4, maze, grid_world, coding, wildfire)
build `State(episode_id=str(uuid4()))` whatever episode id the reset names. Both are
written here the way an openenv author writes them:

- `ignored-seed`: a counter whose starting total is drawn from the system RNG, so the
  reset observation differs for the same seed (it keeps a requested episode id);
- `ignored-episode-id`: the same counter started from the seed (reproducible), but every
  reset gets a fresh `uuid4()` episode id, named or not.

Kept apart from `behaviour_peers.py` so that the conformance verdict table over those peers
does not change; served the same way:

    python -m tests.interop.seed_peers --exit-on-stdin-eof ignored-seed:4 ignored-episode-id:4
"""

from __future__ import annotations

import random
import sys
import uuid
from typing import Any, ClassVar

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

from tests.interop import behaviour_peers, openenv_peers
from tests.interop.behaviour_peers import CountAction, CountObservation


class _Counter(Environment):  # type: ignore[misc]
    """Adds each action's amount; two steps end the episode."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def step(
        self, action: CountAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CountObservation:
        self._state.step_count += 1
        self.total += action.amount
        return CountObservation(
            total=self.total, reward=float(self.total), done=self._state.step_count >= 2
        )

    @property
    def state(self) -> State:
        return self._state


class IgnoredSeedEnvironment(_Counter):
    """The starting total comes from the system RNG: the seed decides nothing."""

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CountObservation:
        self.total = random.SystemRandom().randrange(1_000_000)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return CountObservation(total=self.total, reward=None, done=False)


class IgnoredEpisodeIdEnvironment(_Counter):
    """The game follows the seed; the episode id is always a fresh uuid4."""

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CountObservation:
        self.total = random.Random(seed).randrange(1_000_000)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        return CountObservation(total=self.total, reward=None, done=False)


SEED_PEERS = {
    "ignored-seed": behaviour_peers._limited(
        IgnoredSeedEnvironment, CountAction, CountObservation, "ignored_seed_env"
    ),
    "ignored-episode-id": behaviour_peers._limited(
        IgnoredEpisodeIdEnvironment, CountAction, CountObservation, "ignored_episode_env"
    ),
}


if __name__ == "__main__":
    raise SystemExit(openenv_peers.main_with(SEED_PEERS, sys.argv[1:]))
