"""The contract between the oracle's server framework and its environments.

Every environment is a small, seeded, pure-Python state machine. The server framework
(`oracle.app`) owns everything on the wire: schemas, validation of the action envelope,
error frames, sessions and faults. An environment only ever sees a validated action
(`metadata` already removed) and a reset payload filtered to the option names it declares,
exactly as an OpenEnv server filters reset kwargs by the signature of `Environment.reset`.

The oracle is deliberately independent of `kiln_verify.openenv`: nothing here imports the
client or its codec, so a bug in our codec cannot hide itself behind a matching bug here.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

JsonObject = dict[str, Any]
Reward = None | bool | int | float

#: Named difficulty levels accepted in the reset payload beside the integers 1..5.
DIFFICULTY_NAMES: Mapping[str, int] = {"easy": 1, "medium": 3, "hard": 5}
MIN_DIFFICULTY = 1
MAX_DIFFICULTY = 5
DEFAULT_DIFFICULTY = 2


class ExecutionError(Exception):
    """An action or reset the environment cannot carry out.

    The server answers `EXECUTION_ERROR` with `str(exc)` as the message and keeps the
    socket open, as an OpenEnv server does for any exception raised by `step`/`reset`.
    """


@dataclasses.dataclass(frozen=True)
class ActionField:
    """One property of the action object; the server type-checks it before `step`."""

    name: str
    type: Literal["integer", "string"]
    description: str
    required: bool = True


@dataclasses.dataclass(frozen=True)
class ObservationField:
    """One property of the observation object, advertised in `/schema`."""

    name: str
    schema: Mapping[str, Any]
    description: str


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What `reset` or `step` produced: the wire's `observation`, `reward` and `done`."""

    observation: JsonObject
    reward: Reward
    done: bool


@dataclasses.dataclass(frozen=True)
class ResetRequest:
    """The reset payload after the framework-independent checks of `Environment.reset`."""

    seed: int
    difficulty: int
    options: Mapping[str, Any]


class Environment(abc.ABC):
    """Base class of every oracle environment.

    Subclasses set the class variables and implement `_reset`, `_step` and optionally
    `_extra_state`. One instance serves one WebSocket session, so instances may keep
    state freely; two instances given the same reset payload and actions must produce the
    same bytes in any process (no wall clock, no global RNG, no hash randomisation).
    """

    #: Server name in the inventory and on the CLI (`bandit`).
    server_name: ClassVar[str]
    #: Name served by `/list_environments` and matched by the Task API routes (`bandit_env`).
    env_name: ClassVar[str]
    #: `/metadata` name, the class name as OpenEnv reports it (`BanditEnvironment`).
    class_name: ClassVar[str]
    description: ClassVar[str]
    #: Markdown served as `/metadata.readme_content`.
    readme: ClassVar[str | None] = None
    version: ClassVar[str] = "1.0.0"
    #: `counter`, `game`, `task` (synthesis), `math` (one-step exact answer) or `tools`
    #: (an MCP tool environment, `oracle.tools`).
    category: ClassVar[Literal["counter", "game", "task", "math", "tools"]]
    action_title: ClassVar[str]
    action_fields: ClassVar[tuple[ActionField, ...]]
    observation_title: ClassVar[str]
    observation_fields: ClassVar[tuple[ObservationField, ...]]
    #: The `/schema` action and observation schemas when a framework model fixes them
    #: (OpenEnv's MCP `CallToolAction`), instead of schemas derived from the fields above.
    fixed_schemas: ClassVar[Mapping[str, Any] | None] = None
    #: Extra reset keys this environment understands besides seed, episode_id and
    #: difficulty; any other key is dropped silently, as OpenEnv's signature filter does.
    reset_options: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self.episode_id: str | None = None
        self.step_count = 0
        self.done = False
        self._terminal_observation: JsonObject | None = None
        #: State fields a fault profile adds (`unseeded-hidden-state`); set by the server.
        self.fault_state: JsonObject = {}

    # -- called by the server framework ------------------------------------------------

    def reset(self, payload: Mapping[str, Any]) -> Outcome:
        """Start a new episode from a raw reset payload (already known to be an object)."""
        seed = _parse_seed(payload.get("seed"))
        episode_id = payload.get("episode_id")
        if episode_id is not None and not isinstance(episode_id, str):
            raise ExecutionError("episode_id must be a string or null")
        difficulty = _parse_difficulty(payload.get("difficulty"))
        options = {k: v for k, v in payload.items() if k in self.reset_options}
        outcome = self._reset(ResetRequest(seed=seed, difficulty=difficulty, options=options))
        self.episode_id = episode_id if episode_id is not None else f"episode-{seed}"
        self.step_count = 0
        self.done = outcome.done
        self._terminal_observation = outcome.observation if outcome.done else None
        return outcome

    def step(self, action: Mapping[str, Any]) -> Outcome:
        """Apply a type-checked action; after `done` the terminal observation is frozen."""
        if self.done and self._terminal_observation is not None:
            self.step_count += 1
            return Outcome(dict(self._terminal_observation), None, True)
        outcome = self._step(action)
        self.step_count += 1
        if outcome.done:
            self.done = True
            self._terminal_observation = dict(outcome.observation)
        return outcome

    def state(self) -> JsonObject:
        """The full state as the WebSocket `state` message reports it."""
        state: JsonObject = {"episode_id": self.episode_id, "step_count": self.step_count}
        state.update(self._extra_state())
        state.update(self.fault_state)
        return state

    # -- Task API (optional) -------------------------------------------------------------

    @classmethod
    def task_splits(cls) -> Sequence[Mapping[str, str]] | None:
        """`[{"name", "type"}]`, or None when the environment has no task provider (501)."""
        return None

    @classmethod
    def task_rows(cls, split: str) -> Sequence[Any]:
        """All task rows of a split; unknown splits raise `KeyError` (answered 400)."""
        raise NotImplementedError

    # -- implemented by subclasses --------------------------------------------------------

    @abc.abstractmethod
    def _reset(self, request: ResetRequest) -> Outcome: ...

    @abc.abstractmethod
    def _step(self, action: Mapping[str, Any]) -> Outcome: ...

    def _extra_state(self) -> JsonObject:
        return {}


def _parse_seed(raw: object) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ExecutionError("seed must be a non-negative integer")
    if raw < 0 or raw >= 2**64:
        raise ExecutionError("seed must be between 0 and 2**64 - 1")
    return raw


def _parse_difficulty(raw: object) -> int:
    if raw is None:
        return DEFAULT_DIFFICULTY
    if isinstance(raw, str) and raw in DIFFICULTY_NAMES:
        return DIFFICULTY_NAMES[raw]
    if isinstance(raw, bool) or not isinstance(raw, int) or not (
        MIN_DIFFICULTY <= raw <= MAX_DIFFICULTY
    ):
        raise ExecutionError("difficulty must be an integer 1..5 or one of easy, medium, hard")
    return raw
