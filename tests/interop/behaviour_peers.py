"""openenv 0.10.0 servers that reproduce what real deployments do and our oracle does not.

Each environment here is written the way an openenv author writes one (openenv's
`Environment`/`MCPEnvironment`, pydantic models, `create_app`), to reproduce one behaviour
seen on real OpenEnv deployments, so the conformance suite's verdicts on it can be pinned:

- `slow-single`: `create_app` with no session limit (openenv's default of one session) and
  an environment that takes a while to build; a socket closed while its environment is
  still being built keeps the only slot until the factory returns;
- `uuid-episodes`: `openenv init`'s template shape: a fresh `uuid4()` episode id on every
  reset that does not name one;
- `min-items`: an action that needs a non-empty bounded array, an enum, a const, a pattern,
  an exclusive bound and a union, so a naive action builder finds no valid action;
- `hidden-state`: identical reset observations for the same seed, but a secret drawn from
  an unseeded generator, visible only in the state;
- `toolbox`: an MCP tool environment (`MCPEnvironment` + FastMCP, the shape of openenv's
  `echo_env`) whose tools run the oracle toolbox's tool bodies, for the differential test
  against `oracle.envs.toolbox` and for OpenEnv's own `MCPToolClient`.

Served like `openenv_peers.py` (whose registry it extends), all in one process:

    python -m tests.interop.behaviour_peers --exit-on-stdin-eof slow-single hidden-state:4
"""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from fastapi import FastAPI
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field, StrictInt, StrictStr

from oracle.envs.toolbox import ToolboxEnvironment as OracleToolbox
from tests.interop import openenv_peers

#: How long `slow-single` takes to build an environment.
SLOW_FACTORY_S = 0.4


# -- slow-single: the default single session, slow to build -----------------------------------


class CountAction(Action):  # type: ignore[misc]
    amount: StrictInt = Field(description="Added to the total.")


class CountObservation(Observation):  # type: ignore[misc]
    total: int = Field(description="The running total.")


class SlowCounterEnvironment(Environment):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        time.sleep(SLOW_FACTORY_S)  # loads a model, a dataset, a browser...
        self.total = 0
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> CountObservation:
        self.total = 0
        self._state = State(episode_id=episode_id, step_count=0)
        return CountObservation(total=0, reward=None, done=False)

    def step(self, action: CountAction, timeout_s: float | None = None,
             **kwargs: Any) -> CountObservation:
        self._state.step_count += 1
        self.total += action.amount
        return CountObservation(total=self.total, reward=float(self.total),
                                done=self._state.step_count >= 3)

    @property
    def state(self) -> State:
        return self._state


# -- uuid-episodes: openenv init's template ----------------------------------------------------


class EchoAction(Action):  # type: ignore[misc]
    message: str = Field(..., description="Message to echo back")


class EchoObservation(Observation):  # type: ignore[misc]
    echoed_message: str = Field(default="", description="The echoed message")
    message_length: int = Field(default=0, description="Length of the echoed message")


class UuidEchoEnvironment(Environment):  # type: ignore[misc]
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id if episode_id is not None
                            else str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready", message_length=0, done=False, reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None,
             **kwargs: Any) -> EchoObservation:
        self._state.step_count += 1
        length = len(action.message)
        return EchoObservation(echoed_message=action.message, message_length=length,
                               reward=min(length * 0.1, 1.0), done=self._state.step_count >= 3)

    @property
    def state(self) -> State:
        return self._state


# -- min-items: an action only a schema-aware builder can satisfy ----------------------------


class PlanAction(Action):  # type: ignore[misc]
    moves: list[StrictInt] = Field(min_length=2, max_length=3, description="Two or three moves.")
    mode: Literal["fast", "slow"] = Field(description="How to play them.")
    kind: Literal["plan"] = Field(description="Always 'plan'.")
    code: StrictStr = Field(pattern=r"^[A-Z]{2}[0-9]$", description="A square, like AB3.")
    weight: float = Field(gt=0, le=1, description="Confidence in (0, 1].")
    target: StrictInt | StrictStr = Field(description="A square index or name.")


class PlanObservation(Observation):  # type: ignore[misc]
    position: int = Field(description="Where the plan got to.")


class PlanEnvironment(Environment):  # type: ignore[misc]
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.position = 0
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> PlanObservation:
        self.position = 0
        self._state = State(episode_id=episode_id, step_count=0)
        return PlanObservation(position=0, reward=None, done=False)

    def step(self, action: PlanAction, timeout_s: float | None = None,
             **kwargs: Any) -> PlanObservation:
        self._state.step_count += 1
        self.position += sum(action.moves)
        return PlanObservation(position=self.position, reward=1,
                               done=self._state.step_count >= 2)

    @property
    def state(self) -> State:
        return self._state


# -- hidden-state: the same observation, a different game -----------------------------------


class GuessAction(Action):  # type: ignore[misc]
    guess: StrictInt = Field(ge=0, description="Your guess.")


class GuessObservation(Observation):  # type: ignore[misc]
    input_text: str = Field(description="The prompt.")
    guesses: int = Field(description="Guesses so far.")


class SecretState(State):  # type: ignore[misc]
    secret: int = 0


class HiddenSecretEnvironment(Environment):  # type: ignore[misc]
    """The secret ignores the seed: every reset draws a new one from the system RNG."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self._state = SecretState(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> GuessObservation:
        secret = random.SystemRandom().getrandbits(62)
        self._state = SecretState(episode_id=episode_id or str(uuid.uuid4()), step_count=0,
                                  secret=secret)
        return GuessObservation(input_text="Guess the secret number.", guesses=0, reward=None,
                                done=False)

    def step(self, action: GuessAction, timeout_s: float | None = None,
             **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        won = action.guess == self._state.secret
        return GuessObservation(input_text="Guess the secret number.",
                                guesses=self._state.step_count, reward=int(won), done=True)

    @property
    def state(self) -> State:
        return self._state


# -- toolbox: an MCP tool environment -------------------------------------------------------


class ToolboxState(State):  # type: ignore[misc]
    notes: list[str] = Field(default_factory=list)


class ToolboxEnvironment(MCPEnvironment):  # type: ignore[misc]
    """FastMCP tools whose bodies are the oracle toolbox's (`self.game`), so both servers
    compute the same values; listing, validation and serialisation are FastMCP's and
    openenv's. Reset, state and the step count are delegated the same way."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self) -> None:
        game = OracleToolbox()
        mcp = FastMCP("toolbox_env")

        @mcp.tool
        def echo_message(message: str) -> str:
            """Echo back the provided message."""
            return str(game._invoke("echo_message", {"message": message}))

        @mcp.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return int(game._invoke("add", {"a": a, "b": b}))

        @mcp.tool
        def remember(note: str) -> int:
            """Store a note in this session and return how many notes it holds."""
            return int(game._invoke("remember", {"note": note}))

        super().__init__(mcp)
        self.game = game

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> Observation:
        outcome = self.game.reset({"seed": seed, "episode_id": episode_id, **kwargs})
        return Observation(reward=outcome.reward, done=outcome.done)

    def _step_impl(self, action: Action, timeout_s: float | None = None,
                   **kwargs: Any) -> Observation:
        raise RuntimeError("every toolbox action is an MCP action")

    async def step_async(self, action: Action, timeout_s: float | None = None,
                         **kwargs: Any) -> Observation:
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        self.game.step_count += 1  # the oracle counts every step, tool steps included
        return observation

    @property
    def state(self) -> State:
        return ToolboxState(**self.game.state())

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=type(self).__name__, description=OracleToolbox.description,
                                   readme_content=OracleToolbox.readme,
                                   version=OracleToolbox.version)


# -- registry ---------------------------------------------------------------------------------


def _limited(env: type[Any], action: type[Any], observation: type[Any],
             name: str) -> Callable[[int], FastAPI]:
    def build(max_sessions: int) -> FastAPI:
        app: FastAPI = create_app(env, action, observation, env_name=name,
                                  max_concurrent_envs=max_sessions)
        return app

    return build


def _default_limit(max_sessions: int) -> FastAPI:
    """No `max_concurrent_envs` at all: openenv's default (one session) applies."""
    app: FastAPI = create_app(SlowCounterEnvironment, CountAction, CountObservation,
                              env_name="slow_env")
    return app


BEHAVIOUR_PEERS: dict[str, Callable[[int], FastAPI]] = {
    "slow-single": _default_limit,
    "uuid-episodes": _limited(UuidEchoEnvironment, EchoAction, EchoObservation, "echo_template"),
    "min-items": _limited(PlanEnvironment, PlanAction, PlanObservation, "plan_env"),
    "hidden-state": _limited(HiddenSecretEnvironment, GuessAction, GuessObservation,
                             "secret_env"),
    "toolbox": _limited(ToolboxEnvironment, CallToolAction, CallToolObservation,
                        OracleToolbox.env_name),
}


if __name__ == "__main__":
    raise SystemExit(openenv_peers.main_with(BEHAVIOUR_PEERS, sys.argv[1:]))
