"""Client overhead: kiln's ``OpenEnvClient``/``Session`` versus a minimal raw websockets loop.

Both sides run the same fixed sequence of episodes (reset with a seed, then a fixed number
of steps) against one ``kiln-verify oracle serve bandit --port 0`` server started as a
subprocess, over one WebSocket per round, sending byte-identical frames. Rounds alternate
the two sides (and which goes first) so machine noise hits both; the medians and their
ratio (client / raw; target at most 1.3x) are reported. Connection set-up is not timed.

    python -m benchmarks.client_overhead --episodes 200 --rounds 5 [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from typing import Any

from benchmarks._common import oracle_command, start_server_process

TARGET_RATIO = 1.3
SERVER = "bandit"
ARMS = 10


def frames(episodes: int, steps: int) -> list[tuple[str, list[str]]]:
    """The exact texts both sides send: per episode a reset and its steps."""
    from kiln_verify.openenv.protocol.wire import encode_reset, encode_step

    return [
        (
            encode_reset({"seed": episode}),
            [encode_step({"arm": (episode + step) % ARMS}) for step in range(steps)],
        )
        for episode in range(episodes)
    ]


async def run_client(base_url: str, episodes: int, steps: int) -> float:
    from kiln_verify.openenv.protocol.client import OpenEnvClient

    async with OpenEnvClient(base_url) as client:
        session = await client.open_session()
        try:
            started = time.perf_counter()
            for episode in range(episodes):
                await session.reset({"seed": episode})
                for step in range(steps):
                    await session.step({"arm": (episode + step) % ARMS})
            elapsed = time.perf_counter() - started
        finally:
            await session.close()
    return elapsed


async def run_raw(ws_url: str, plan: list[tuple[str, list[str]]]) -> float:
    from websockets.asyncio.client import connect

    async with connect(ws_url) as ws:
        started = time.perf_counter()
        for reset, steps in plan:
            await ws.send(reset)
            reply = json.loads(await ws.recv())
            if reply.get("type") != "observation":
                raise RuntimeError(f"raw reset answered {reply.get('type')!r}")
            for text in steps:
                await ws.send(text)
                reply = json.loads(await ws.recv())
                if reply.get("type") != "observation":
                    raise RuntimeError(f"raw step answered {reply.get('type')!r}")
        elapsed = time.perf_counter() - started
        await ws.send('{"type":"close"}')
    return elapsed


def measure(base_url: str, episodes: int, steps: int, rounds: int) -> dict[str, Any]:
    ws_url = base_url.replace("http://", "ws://", 1) + "/ws"
    plan = frames(episodes, steps)
    client_s: list[float] = []
    raw_s: list[float] = []
    for round_index in range(rounds):
        order = ("client", "raw") if round_index % 2 == 0 else ("raw", "client")
        for side in order:
            if side == "client":
                client_s.append(asyncio.run(run_client(base_url, episodes, steps)))
            else:
                raw_s.append(asyncio.run(run_raw(ws_url, plan)))
    client_median = statistics.median(client_s)
    raw_median = statistics.median(raw_s)
    exchanges = episodes * (steps + 1)
    return {
        "benchmark": "client_overhead",
        "server": f"kiln-verify oracle serve {SERVER} (subprocess)",
        "episodes": episodes,
        "steps_per_episode": steps,
        "exchanges_per_round": exchanges,
        "rounds": rounds,
        "client_s": [round(value, 4) for value in client_s],
        "raw_s": [round(value, 4) for value in raw_s],
        "client_median_s": round(client_median, 4),
        "raw_median_s": round(raw_median, 4),
        "client_us_per_exchange": round(1e6 * client_median / exchanges, 1),
        "raw_us_per_exchange": round(1e6 * raw_median / exchanges, 1),
        "ratio": round(client_median / raw_median, 3),
        "target_ratio": TARGET_RATIO,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.steps < 0 or args.rounds < 1:
        parser.error("--episodes and --rounds must be >= 1, --steps >= 0")
    server = start_server_process(oracle_command(SERVER), label=f"oracle-{SERVER}")
    try:
        result = measure(server.base_url, args.episodes, args.steps, args.rounds)
    finally:
        server.stop()
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"client {result['client_median_s']:.3f} s "
            f"({result['client_us_per_exchange']} us/exchange), raw "
            f"{result['raw_median_s']:.3f} s ({result['raw_us_per_exchange']} us/exchange), "
            f"ratio {result['ratio']:.3f}x (target <= {TARGET_RATIO}x)\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
