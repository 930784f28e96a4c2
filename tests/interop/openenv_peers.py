"""OpenEnv 0.10.0 peer servers hosting environments equivalent to our oracle's.

Every peer here is written against the reference package's own server API -- `Action`,
`Observation`, `State` and `Environment` subclasses served by `create_app(...)` -- so the
wire layer (framing, validation, error codes, sessions, capacity, HTTP routes, the Task API)
is entirely openenv's code, written by others. Only the game logic is shared: each peer
delegates `reset`/`step`/`state` to the very oracle environment class it is compared with,
so both servers compute the same observations and any difference on the wire is a
difference between our server framework and openenv's.

The models are hand-written from the oracle's declarations (not generated from them), the
way an openenv author would write them: an independent statement of what the action and
observation look like, which the differential tests compare with the schemas our framework
derives from `ActionField`/`ObservationField`. Action fields are `StrictInt`/`StrictStr`
because the oracle documents its action fields as strict (`true`, `5.0` and `"5"` are not
integers); with plain `int` openenv would coerce those. States are `State` subclasses, as
openenv's own environments declare them, which is what makes HTTP `/state` show only the
base fields while WebSocket `state` shows everything.

Run as a script it serves one app per argument on its own loopback port, all in this one
process so the slow `openenv` import (it pulls in gradio) is paid once:

    python tests/interop/openenv_peers.py counter:8 bandit:1 algebra:8 bandit:4:nodeflate

It prints one `http://127.0.0.1:PORT` line per server, in argument order, once all listen,
and exits on SIGTERM/SIGINT -- and, with `--exit-on-stdin-eof`, when its stdin reaches EOF,
so a parent that hands it a pipe as stdin can never leave it running, even if killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, ClassVar

import uvicorn
from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field, SerializerFunctionWrapHandler, StrictInt, StrictStr, model_serializer

from oracle import base as oracle_base
from oracle.envs.bandit import BanditEnvironment as OracleBandit
from oracle.envs.counter import CounterEnvironment as OracleCounter
from oracle.envs.math.algebra import AlgebraEnvironment as OracleAlgebra

# -- shared delegation -----------------------------------------------------------------------


class OracleBackedEnvironment(Environment):  # type: ignore[misc]
    """An openenv `Environment` whose game logic is one oracle environment instance.

    `reset` takes `seed`, `episode_id` and `**kwargs`, so openenv's signature filter passes
    every reset key through, and the oracle environment applies its own option filter: the
    same keys reach the same game on both servers. An `oracle.base.ExecutionError` (or any
    other exception) propagates, which openenv answers with `EXECUTION_ERROR` and `str(exc)`.
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    oracle_class: ClassVar[type[oracle_base.Environment]]
    observation_class: ClassVar[type[Observation]]
    state_class: ClassVar[type[State]]

    def __init__(self) -> None:
        super().__init__()
        self.game = self.oracle_class()

    def _wire(self, outcome: oracle_base.Outcome) -> Observation:
        return self.observation_class(
            **outcome.observation, reward=outcome.reward, done=outcome.done
        )

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        payload: dict[str, Any] = {"seed": seed, "episode_id": episode_id, **kwargs}
        return self._wire(self.game.reset(payload))

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        fields = action.model_dump(exclude={"metadata"})
        return self._wire(self.game.step(fields))

    @property
    def state(self) -> State:
        return self.state_class(**self.game.state())

    def get_metadata(self) -> EnvironmentMetadata:
        # The name stays openenv's default (the class name); the rest is the oracle's text.
        return EnvironmentMetadata(
            name=type(self).__name__,
            description=self.oracle_class.description,
            readme_content=self.oracle_class.readme,
            version=self.oracle_class.version,
        )


class TaskApiMixin:
    """openenv's structural `TaskProvider` methods, delegated to the oracle's task rows.

    openenv answers 400 only for `IndexError` (anything else is a 500), so an unknown split
    (the oracle's `KeyError`) is raised as `IndexError` here: our framework answers 400 for
    both, and this is how an openenv author would get the same statuses.
    """

    oracle_class: ClassVar[type[oracle_base.Environment]]

    def _rows(self, split: str) -> list[Any]:
        try:
            return list(self.oracle_class.task_rows(split))
        except KeyError as exc:
            raise IndexError(f"unknown split {split!r}") from exc

    def list_splits(self) -> list[dict[str, str]]:
        splits = self.oracle_class.task_splits()
        if splits is None:
            raise NotImplementedError
        return [dict(split) for split in splits]

    def list_tasks(self, split: str) -> list[Any]:
        return self._rows(split)

    def num_tasks(self, split: str) -> int:
        return len(self._rows(split))

    def get_task(self, split: str, index: int) -> Any:
        rows = self._rows(split)
        if index < 0:  # a row index, not a Python index from the end
            raise IndexError(index)
        return rows[index]

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[Any]:
        return self._rows(split)[start:stop]


def action_doc(env: type[oracle_base.Environment], name: str) -> str:
    """The oracle's description of an action field: prose is copied, types are written out."""
    return _doc(env.action_fields, env, name)


def obs_doc(env: type[oracle_base.Environment], name: str) -> str:
    """The oracle's description of an observation field."""
    return _doc(env.observation_fields, env, name)


def _doc(
    fields: Sequence[oracle_base.ActionField | oracle_base.ObservationField],
    env: type[oracle_base.Environment],
    name: str,
) -> str:
    for field in fields:
        if field.name == name:
            return field.description
    raise KeyError(f"{env.__name__} declares no field {name!r}")


# -- counter ----------------------------------------------------------------------------------


class CounterAction(Action):  # type: ignore[misc]
    amount: StrictInt = Field(description=action_doc(OracleCounter, "amount"))
    note: StrictStr | None = Field(default=None, description=action_doc(OracleCounter, "note"))


class CounterObservation(Observation):  # type: ignore[misc]
    total: int = Field(description=obs_doc(OracleCounter, "total"))
    target: int = Field(description=obs_doc(OracleCounter, "target"))
    last_note: str | None = Field(description=obs_doc(OracleCounter, "last_note"))


class CounterState(State):  # type: ignore[misc]
    total: int = 0


class CounterEnvironment(OracleBackedEnvironment):
    oracle_class = OracleCounter
    observation_class = CounterObservation
    state_class = CounterState


# -- bandit -----------------------------------------------------------------------------------


class BanditAction(Action):  # type: ignore[misc]
    arm: StrictInt = Field(description=action_doc(OracleBandit, "arm"))


class BanditObservation(Observation):  # type: ignore[misc]
    input_text: str = Field(min_length=1, description=obs_doc(OracleBandit, "input_text"))
    arms: int = Field(ge=1, description=obs_doc(OracleBandit, "arms"))
    pulls: int = Field(ge=0, description=obs_doc(OracleBandit, "pulls"))
    pulls_left: int = Field(ge=0, description=obs_doc(OracleBandit, "pulls_left"))
    last_arm: int | None = Field(description=obs_doc(OracleBandit, "last_arm"))
    last_reward: int | None = Field(description=obs_doc(OracleBandit, "last_reward"))
    total_reward: int = Field(ge=0, description=obs_doc(OracleBandit, "total_reward"))
    arm_pulls: list[int] = Field(description=obs_doc(OracleBandit, "arm_pulls"))
    arm_wins: list[int] = Field(description=obs_doc(OracleBandit, "arm_wins"))
    legal_actions: list[int] = Field(description=obs_doc(OracleBandit, "legal_actions"))


class BanditState(State):  # type: ignore[misc]
    seed: int = 0
    difficulty: int = 2
    pulls: int = 0
    total_reward: int = 0


class BanditEnvironment(OracleBackedEnvironment):
    oracle_class = OracleBandit
    observation_class = BanditObservation
    state_class = BanditState


# -- algebra (one of the eight math families; the only peer with a Task API) -----------------


class AlgebraAction(Action):  # type: ignore[misc]
    answer: StrictStr = Field(description=action_doc(OracleAlgebra, "answer"))


class AlgebraObservation(Observation):  # type: ignore[misc]
    input_text: str = Field(min_length=1, description=obs_doc(OracleAlgebra, "input_text"))
    difficulty: int = Field(ge=1, le=5, description=obs_doc(OracleAlgebra, "difficulty"))
    # Absent until the answer step, so an openenv author must give them a default.
    answer: str = Field(default="", description=obs_doc(OracleAlgebra, "answer"))
    correct: bool = Field(default=False, description=obs_doc(OracleAlgebra, "correct"))

    @model_serializer(mode="wrap")
    def _absent_until_answered(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The oracle's math observations omit `answer`/`correct` before the answer step; a
        # pydantic model dumps every field, so leave the two out unless they were set.
        data: dict[str, Any] = handler(self)
        for key in ("answer", "correct"):
            if key not in self.model_fields_set:
                data.pop(key, None)
        return data


class AlgebraState(State):  # type: ignore[misc]
    seed: int = 0
    difficulty: int = 2
    task: dict[str, Any] | None = None


class AlgebraEnvironment(TaskApiMixin, OracleBackedEnvironment):
    oracle_class = OracleAlgebra
    observation_class = AlgebraObservation
    state_class = AlgebraState


# -- a failing factory (the oracle's `factory-error` fault) -----------------------------------


class BrokenCounterEnvironment(CounterEnvironment):
    """The counter whose every construction fails, like `--fault factory-error`."""

    def __init__(self) -> None:
        raise RuntimeError("factory-error fault: the environment factory failed")


# openenv names the factory in FACTORY_ERROR by `__name__`; the oracle names its class.
BrokenCounterEnvironment.__name__ = CounterEnvironment.__name__


# -- registry and serving ---------------------------------------------------------------------

PeerFactory = Callable[[int], FastAPI]


def _app(env: type[OracleBackedEnvironment], action: type[Action]) -> PeerFactory:
    def build(max_sessions: int) -> FastAPI:
        app: FastAPI = create_app(
            env,
            action,
            env.observation_class,
            env_name=env.oracle_class.env_name,
            max_concurrent_envs=max_sessions,
        )
        return app

    return build


PEERS: dict[str, PeerFactory] = {
    "counter": _app(CounterEnvironment, CounterAction),
    "bandit": _app(BanditEnvironment, BanditAction),
    "algebra": _app(AlgebraEnvironment, AlgebraAction),
    "counter-factory-error": _app(BrokenCounterEnvironment, CounterAction),
}


def build_app(name: str, max_sessions: int) -> FastAPI:
    """The openenv app for peer `name` with `max_concurrent_envs=max_sessions`."""
    try:
        factory = PEERS[name]
    except KeyError:
        raise KeyError(f"unknown peer {name!r}; known: {', '.join(PEERS)}") from None
    return factory(max_sessions)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to `serve_forever` (several share a loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _parse(argument: str) -> tuple[str, int, bool]:
    """`NAME[:MAX_SESSIONS[:nodeflate]]` -> (name, max sessions, permessage-deflate)."""
    name, _, rest = argument.partition(":")
    sessions, _, option = rest.partition(":")
    if option not in ("", "nodeflate"):
        raise SystemExit(f"unknown peer option {option!r} in {argument!r}")
    return name, int(sessions) if sessions else 8, option != "nodeflate"


async def serve_forever(
    specs: Sequence[tuple[str, int, bool]], *, watch_parent_stdin: bool
) -> None:
    """Serve every `(name, max_sessions, deflate)` on its own loopback port until stopped.

    uvicorn runs with its defaults, as `uvicorn server.app:app` would, except that
    `deflate=False` declines permessage-deflate (for comparisons with servers that do).
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    servers: list[tuple[_Server, socket.socket]] = []
    for name, max_sessions, deflate in specs:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            build_app(name, max_sessions),
            log_level="warning",
            timeout_graceful_shutdown=3,
            ws_per_message_deflate=deflate,
        )
        servers.append((_Server(config), sock))
    tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, sock in servers]

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def watch_stdin() -> None:
        # os.read, not sys.stdin: a daemon thread blocked inside the buffered reader aborts
        # the interpreter at exit ("could not acquire lock for <stdin>").
        with contextlib.suppress(OSError):
            while os.read(0, 65536):
                pass
        loop.call_soon_threadsafe(stop.set)

    if watch_parent_stdin:
        threading.Thread(target=watch_stdin, daemon=True).start()

    while not all(server.started for server, _ in servers):
        if any(task.done() for task in tasks):
            await asyncio.gather(*tasks)  # surfaces the start-up error
            raise SystemExit("a peer server stopped during start-up")
        await asyncio.sleep(0.01)
    for _, sock in servers:
        host, port = sock.getsockname()[:2]
        print(f"http://{host}:{port}", flush=True)

    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    for server, _ in servers:
        server.should_exit = True
    waiter.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def main(argv: Sequence[str]) -> int:
    watch = "--exit-on-stdin-eof" in argv
    names = [argument for argument in argv if not argument.startswith("--")]
    if not names:
        print(
            "usage: openenv_peers.py [--exit-on-stdin-eof] NAME[:MAX_SESSIONS[:nodeflate]] ... "
            f"(names: {', '.join(PEERS)})"
        )
        return 2
    os.environ.pop("ENABLE_WEB_INTERFACE", None)
    asyncio.run(serve_forever([_parse(name) for name in names], watch_parent_stdin=watch))
    return 0


def main_with(extra: Mapping[str, PeerFactory], argv: Sequence[str]) -> int:
    """`main` with `extra` peers beside these: the entry point of the peer modules that
    extend this one (`behaviour_peers`, `seed_peers`, `state_peers`)."""
    PEERS.update(extra)
    return main(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
