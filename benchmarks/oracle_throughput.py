"""Steps per second: our oracle `bandit` versus an openenv 0.10.0 server hosting the same game.

All servers run as subprocesses on loopback in the same run: ours through
`kiln-verify oracle serve bandit`; the peer through `tests/interop/openenv_peers.py`, an
openenv `create_app` server whose game logic is the oracle's own `BanditEnvironment`, so
both compute identical observations and the comparison measures the servers alone. Both
run under uvicorn (`websockets-sansio`). The peer is measured twice: as uvicorn serves it
by default (accepting the client's permessage-deflate offer) and declining deflate, as our
oracle does by default -- so the ratio can be read with and without that difference.

One raw `websockets` asyncio client (default settings) drives every server with the same
loop: per session, `episodes` times a `reset` then the bandit's 20 `step`s in lock-step
(one frame in flight), then `close`. The workload runs once sequentially (one session at a
time: latency-bound) and once with `concurrency` sessions at a time. After a warm-up the
servers are measured in turn `repeats` times (order alternating). Reported per mode, as
medians:

* steps/s -- step frames per second of wall time (connect, resets and close included);
  the headline number, and the one the >= 2x target is judged on;
* steps per server CPU second -- the same steps divided by the CPU time the server process
  used meanwhile (Linux `/proc`): what the server could sustain on a core of its own. The
  client shares the machine, so the wall-clock ratio understates the servers' own ratio;
* with `--floor`, a do-nothing server (same uvicorn, same client) as the ceiling this
  client reaches here: time per step above it is what a server's own work costs.

    python -m benchmarks.oracle_throughput            # table
    python -m benchmarks.oracle_throughput --json     # one JSON line as well
    python -m benchmarks.oracle_throughput --floor    # plus the do-nothing ceiling

The exit status is 0 whatever the ratio; the output says whether the >= 2x target is met.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from websockets.asyncio.client import ClientConnection, connect

from benchmarks._common import (
    PeerSpec,
    ServerProcess,
    running,
    start_openenv_peers,
    start_oracle_process,
    start_server_process,
)

TARGET_RATIO = 2.0
#: `oracle.envs.bandit.PULLS`: steps per episode (the episode is done after these).
STEPS_PER_EPISODE = 20
ARMS = 10


@dataclasses.dataclass(frozen=True)
class Workload:
    """What one measurement runs against one server."""

    sessions: int = 8
    episodes: int = 20
    concurrency: int = 4
    repeats: int = 5
    warmup_sessions: int = 2

    @property
    def steps(self) -> int:
        return self.sessions * self.episodes * STEPS_PER_EPISODE


@dataclasses.dataclass(frozen=True)
class Sample:
    """One run of the workload against one server."""

    steps: int
    wall_s: float
    server_cpu_s: float | None

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s

    @property
    def steps_per_cpu_s(self) -> float | None:
        if self.server_cpu_s is None or self.server_cpu_s <= 0:
            return None
        return self.steps / self.server_cpu_s


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The samples of one server in one mode and their medians."""

    server: str
    mode: str
    samples: tuple[Sample, ...]

    @property
    def steps_per_s(self) -> float:
        return statistics.median(sample.steps_per_s for sample in self.samples)

    @property
    def steps_per_cpu_s(self) -> float | None:
        rates = [sample.steps_per_cpu_s for sample in self.samples]
        known = [rate for rate in rates if rate is not None]
        return statistics.median(known) if known and len(known) == len(rates) else None


#: The baselines ours is compared with: openenv as uvicorn serves it by default (accepting
#: permessage-deflate, which our oracle declines by default), and openenv declining it too.
BASELINES: dict[str, str] = {
    "openenv": "openenv 0.10.0, uvicorn defaults (permessage-deflate accepted)",
    "openenv-nodeflate": "openenv 0.10.0, permessage-deflate declined (as ours)",
}
FLOOR_LABEL = "a do-nothing server: same uvicorn (no deflate), same client"


@dataclasses.dataclass(frozen=True)
class Ratio:
    """Ours relative to one baseline in one mode."""

    baseline: str
    wall: float
    cpu: float | None

    @property
    def meets_target(self) -> bool:
        return self.wall >= TARGET_RATIO


@dataclasses.dataclass(frozen=True)
class ModeResult:
    """Every server's measurement in one mode (`ours`, the baselines, maybe `floor`)."""

    mode: str
    measurements: dict[str, Measurement]

    def ratio(self, baseline: str) -> Ratio:
        ours, theirs = self.measurements["ours"], self.measurements[baseline]
        cpu = None
        if ours.steps_per_cpu_s is not None and theirs.steps_per_cpu_s is not None:
            cpu = ours.steps_per_cpu_s / theirs.steps_per_cpu_s
        return Ratio(baseline, ours.steps_per_s / theirs.steps_per_s, cpu)

    def ratios(self) -> list[Ratio]:
        return [self.ratio(baseline) for baseline in BASELINES if baseline in self.measurements]


@dataclasses.dataclass(frozen=True)
class BenchmarkResult:
    workload: Workload
    modes: tuple[ModeResult, ...]
    machine: str

    def meets_target(self, baseline: str = "openenv") -> bool:
        """Ours >= 2x the baseline's steps/s in every mode."""
        return all(mode.ratio(baseline).meets_target for mode in self.modes)

    def as_json(self) -> dict[str, object]:
        def rounded(value: float | None, digits: int = 1) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "benchmark": "oracle_throughput",
            "machine": self.machine,
            "workload": dataclasses.asdict(self.workload),
            "steps_per_session": self.workload.episodes * STEPS_PER_EPISODE,
            "target_ratio": TARGET_RATIO,
            "results": [
                {
                    "mode": mode.mode,
                    "servers": {
                        name: {
                            "steps_per_s": rounded(m.steps_per_s),
                            "steps_per_cpu_s": rounded(m.steps_per_cpu_s),
                            "samples": [rounded(s.steps_per_s) for s in m.samples],
                        }
                        for name, m in mode.measurements.items()
                    },
                    "ratios": {
                        r.baseline: {
                            "steps_per_s": rounded(r.wall, 3),
                            "steps_per_cpu_s": rounded(r.cpu, 3),
                            "meets_target": r.meets_target,
                        }
                        for r in mode.ratios()
                    },
                }
                for mode in self.modes
            ],
            "meets_target": self.meets_target("openenv"),
            "meets_target_same_compression": self.meets_target("openenv-nodeflate"),
        }


class ProtocolMismatch(RuntimeError):
    """A server answered something other than an observation during the benchmark."""


def _ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://", 1).rstrip("/") + "/ws"


async def _expect_observation(ws: ClientConnection) -> None:
    reply = await ws.recv()
    # A prefix check keeps the client's own cost tiny and identical for both servers.
    if not isinstance(reply, str) or not reply.startswith('{"type":"observation"'):
        raise ProtocolMismatch(f"expected an observation frame, got {str(reply)[:200]!r}")


async def run_session(base_url: str, session: int, episodes: int) -> int:
    """One session: `episodes` x (reset + 20 lock-step pulls), then close; returns steps."""
    steps = 0
    async with connect(_ws_url(base_url), proxy=None, ping_interval=None, max_size=None) as ws:
        for episode in range(episodes):
            seed = session * 1000 + episode
            await ws.send(f'{{"type":"reset","data":{{"seed":{seed}}}}}')
            await _expect_observation(ws)
            for pull in range(STEPS_PER_EPISODE):
                await ws.send(f'{{"type":"step","data":{{"arm":{(seed + pull) % ARMS}}}}}')
                await _expect_observation(ws)
                steps += 1
        await ws.send('{"type":"close"}')
    return steps


async def run_workload(base_url: str, sessions: int, episodes: int, concurrency: int) -> int:
    """Run `sessions` sessions, at most `concurrency` at a time; returns the steps taken."""
    gate = asyncio.Semaphore(concurrency)

    async def gated(session: int) -> int:
        async with gate:
            return await run_session(base_url, session, episodes)

    counts = await asyncio.gather(*(gated(session) for session in range(sessions)))
    return sum(counts)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (all its threads) from `/proc`; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # fields[0] is field 3 (state) of proc(5)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass(frozen=True)
class Target:
    """A server under test: its label, base URL and (for CPU accounting) process id."""

    name: str
    base_url: str
    pid: int | None = None


def sample(target: Target, sessions: int, episodes: int, concurrency: int) -> Sample:
    before = process_cpu_seconds(target.pid) if target.pid is not None else None
    started = time.perf_counter()
    steps = asyncio.run(run_workload(target.base_url, sessions, episodes, concurrency))
    wall = time.perf_counter() - started
    after = process_cpu_seconds(target.pid) if target.pid is not None else None
    cpu = None if before is None or after is None else after - before
    return Sample(steps=steps, wall_s=wall, server_cpu_s=cpu)


def measure(targets: Sequence[Target], workload: Workload) -> tuple[ModeResult, ...]:
    """Warm every server up, then measure them in turn, sequential and concurrent."""
    modes = {"sequential": 1, f"concurrent x{workload.concurrency}": workload.concurrency}
    for target in targets:
        sample(target, workload.warmup_sessions, 2, workload.concurrency)
    samples: dict[tuple[str, str], list[Sample]] = {
        (target.name, mode): [] for target in targets for mode in modes
    }
    for repeat in range(workload.repeats):
        # Alternate the order so slow drift (thermal, caches, neighbours) cancels out.
        order = list(targets) if repeat % 2 == 0 else list(reversed(targets))
        for mode, concurrency in modes.items():
            for target in order:
                samples[(target.name, mode)].append(
                    sample(target, workload.sessions, workload.episodes, concurrency)
                )
    return tuple(
        ModeResult(
            mode,
            {
                target.name: Measurement(target.name, mode, tuple(samples[(target.name, mode)]))
                for target in targets
            },
        )
        for mode in modes
    )


# -- the floor: a server that does nothing but answer ------------------------------------------


def _floor_frame() -> str:
    """A real bandit observation frame (the oracle's reset reply for seed 0), built once."""
    from oracle.envs.bandit import BanditEnvironment
    from oracle.wire import dumps, observation_frame

    outcome = BanditEnvironment().reset({"seed": 0})
    return dumps(observation_frame(outcome.observation, outcome.reward, outcome.done))


def floor_app(frame: str) -> Any:
    """Raw ASGI: `/health` 200; `/ws` answers every text frame with `frame`, `close` closes.

    No parsing, no validation, no environment: the same uvicorn and the same client, so its
    steps/s is the ceiling this client loop can reach on this machine, and the time per step
    above it is what a server's own work costs.
    """

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await receive()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b'{"status":"healthy"}'})
        elif scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.accept"})
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") == '{"type":"close"}':
                    await send({"type": "websocket.close", "code": 1000})
                    return
                await send({"type": "websocket.send", "text": frame})

    return app


def serve_floor() -> int:
    """`--serve-floor`: run the floor server on a free loopback port until SIGTERM."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        floor_app(_floor_frame()),
        log_level="warning",
        lifespan="off",
        ws_per_message_deflate=False,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def start_floor_process() -> ServerProcess:
    argv = [sys.executable, "-m", "benchmarks.oracle_throughput", "--serve-floor"]
    return start_server_process(argv, label="floor")


def machine_description() -> str:
    return (
        f"{os.cpu_count()} CPU cores, {platform.machine()}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def run_benchmark(workload: Workload, *, with_floor: bool = False) -> BenchmarkResult:
    """Start every server as a subprocess, measure them, and always stop them.

    Ours runs alone in its process; both openenv baselines share one peer process (the
    gradio import is paid once) -- they are never measured at the same time, so each
    sample's server CPU time is still that one server's.
    """
    slots = max(workload.concurrency, 1)
    with contextlib.ExitStack() as stack:
        ours = stack.enter_context(running(start_oracle_process("bandit", max_sessions=slots)))
        peers = stack.enter_context(
            running(
                start_openenv_peers(
                    [PeerSpec("bandit", slots), PeerSpec("bandit", slots, deflate=False)]
                )
            )
        )
        targets = [
            Target("ours", ours.base_url, ours.process.pid),
            Target("openenv", peers.urls[0], peers.process.pid),
            Target("openenv-nodeflate", peers.urls[1], peers.process.pid),
        ]
        if with_floor:
            floor = stack.enter_context(running(start_floor_process()))
            targets.append(Target("floor", floor.base_url, floor.process.pid))
        modes = measure(targets, workload)
    return BenchmarkResult(workload, modes, machine_description())


def render_table(result: BenchmarkResult) -> str:
    workload = result.workload
    labels = {
        "ours": "our oracle, `kiln-verify oracle serve bandit` defaults (no deflate)",
        **BASELINES,
        "floor": FLOOR_LABEL,
    }
    lines = [
        f"oracle throughput: bandit, {workload.sessions} sessions x {workload.episodes} "
        f"episodes x {STEPS_PER_EPISODE} steps per mode, median of {workload.repeats}",
        f"machine: {result.machine}",
        "",
        f"{'mode':<14} {'server':<19} {'steps/s':>8} {'us/step':>8} {'steps/CPU-s':>12}"
        f"  {'ours/this':>9} {'(CPU)':>7}",
    ]
    for mode in result.modes:
        ratios = {r.baseline: r for r in mode.ratios()}
        for index, (name, m) in enumerate(mode.measurements.items()):
            cpu = "n/a" if m.steps_per_cpu_s is None else f"{m.steps_per_cpu_s:.0f}"
            ratio = ratios.get(name)
            versus = ""
            if ratio is not None:
                cpu_ratio = "n/a" if ratio.cpu is None else f"{ratio.cpu:.2f}x"
                versus = f"  {ratio.wall:>8.2f}x {cpu_ratio:>7}"
            lines.append(
                f"{mode.mode if index == 0 else '':<14} {name:<19} {m.steps_per_s:>8.0f} "
                f"{1e6 / m.steps_per_s:>8.0f} {cpu:>12}{versus}"
            )
    lines.append("")
    lines.extend(
        f"  {name}: {label}"
        for name, label in labels.items()
        if any(name in mode.measurements for mode in result.modes)
    )
    lines.append("")
    for baseline in BASELINES:
        verdict = "met" if result.meets_target(baseline) else "NOT met"
        worst = min(mode.ratio(baseline).wall for mode in result.modes)
        lines.append(
            f"target ours >= {TARGET_RATIO:g}x {baseline} steps/s in every mode: "
            f"{verdict} (lowest {worst:.2f}x)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.oracle_throughput",
        description="Steps per second of the oracle bandit versus an openenv 0.10.0 peer.",
    )
    defaults = Workload()
    parser.add_argument(
        "--sessions",
        type=int,
        default=defaults.sessions,
        help="sessions per measurement (default %(default)s)",
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=defaults.episodes,
        help="episodes (reset + 20 steps) per session (default %(default)s)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=defaults.concurrency,
        help="sessions at a time in the concurrent mode (default %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=defaults.repeats,
        help="measurements per server and mode (default %(default)s)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure a do-nothing server: this client's ceiling",
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_floor:
        return serve_floor()
    for name in ("sessions", "episodes", "concurrency", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    workload = Workload(
        sessions=args.sessions,
        episodes=args.episodes,
        concurrency=args.concurrency,
        repeats=args.repeats,
    )
    result = run_benchmark(workload, with_floor=args.floor)
    print(render_table(result))
    if args.json:
        print(json.dumps(result.as_json(), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
