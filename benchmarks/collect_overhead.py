"""Collector overhead: ``kiln-verify``'s rollout collector versus a raw websockets loop.

Both sides do the same wire work against one ``kiln-verify oracle serve bandit --port 0``
subprocess: discovery (``/health`` and the four discovery GETs) before and after, then
per group (sequentially) ``group_size`` candidates with ``min(concurrency, group_size)``
in flight, each ``/health`` + WebSocket upgrade + ``reset({"seed": g})`` + the group's
hidden-state check's ``state`` (groups of two or more; not with ``--no-state-check``) +
``max_steps`` identical ``step`` frames + ``state`` + ``close``. The collector side uses a
zero-cost scripted policy and includes everything it does: prompts, records, digests,
group integrity, revalidation, building the three files and publishing them (into a
temporary directory). Rounds alternate the two sides; medians and their ratio (collector / raw,
target at most 1.3x) are reported, and beside them the client's CPU time per side
(``time.process_time`` of this process, which runs only the client; the server is a
subprocess): on a shared machine the CPU ratio moves less than the wall ratio.

    python -m benchmarks.collect_overhead --groups 64 --group-size 4 --rounds 5 [--json]
        [--no-state-check]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    add_plan_arguments,
    oracle_command,
    plan_controls,
    start_server_process,
)

TARGET_RATIO = 1.3
SERVER = "bandit"
ARMS = 10
DISCOVERY = ("/metadata", "/schema", "/list_environments", "/openapi.json")


_ACTIONS = tuple(json.dumps({"arm": arm}) for arm in range(ARMS))
"""The action texts, built once: the zero-cost policy only looks its answer up (the raw
side builds its step frames once too)."""


def _action(step_index: int) -> str:
    return _ACTIONS[step_index % ARMS]


async def run_collector(base_url: str, args: argparse.Namespace, directory: Path) -> float:
    from kiln_verify.openenv.collect import run_collection
    from kiln_verify.openenv.policy.scripted import ScriptedPolicy

    policy = ScriptedPolicy(lambda request: _action(request.step_index), name="bench")
    controls = plan_controls(base_url, args, directory, state_check=args.state_check)
    started = time.perf_counter()
    bundle = await run_collection(controls, policy)
    elapsed = time.perf_counter() - started
    if bundle.record.stats.total_environment_steps != args.groups * args.group_size * args.steps:
        raise RuntimeError("the collector did not run every step")
    return elapsed


async def run_raw(base_url: str, args: argparse.Namespace) -> float:
    import httpx
    from websockets.asyncio.client import connect

    ws_url = base_url.replace("http://", "ws://", 1) + "/ws"
    steps = [
        json.dumps({"type": "step", "data": json.loads(_action(i))}) for i in range(args.steps)
    ]
    # the collector's hidden-state check: one state right after reset, groups of two or more
    state_after_reset = args.state_check and args.group_size > 1

    async def discover(http: httpx.AsyncClient) -> None:
        (await http.get(base_url + "/health")).raise_for_status()
        replies = await asyncio.gather(*(http.get(base_url + path) for path in DISCOVERY))
        for reply in replies:
            reply.raise_for_status()
            reply.json()

    async def episode(http: httpx.AsyncClient, seed: int, gate: asyncio.Semaphore) -> None:
        async with gate:
            (await http.get(base_url + "/health")).raise_for_status()
            async with connect(ws_url) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
                if json.loads(await ws.recv()).get("type") != "observation":
                    raise RuntimeError("raw reset failed")
                if state_after_reset:
                    await ws.send('{"type":"state"}')
                    json.loads(await ws.recv())
                for text in steps:
                    await ws.send(text)
                    if json.loads(await ws.recv()).get("type") != "observation":
                        raise RuntimeError("raw step failed")
                await ws.send('{"type":"state"}')
                json.loads(await ws.recv())
                await ws.send('{"type":"close"}')

    async with httpx.AsyncClient(trust_env=False) as http:
        started = time.perf_counter()
        await discover(http)
        gate = asyncio.Semaphore(min(args.concurrency, args.group_size))
        for group in range(args.groups):
            await asyncio.gather(*(episode(http, group, gate) for _ in range(args.group_size)))
        await discover(http)
        return time.perf_counter() - started


def measure(base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    collector_s: list[float] = []
    raw_s: list[float] = []
    collector_cpu: list[float] = []
    raw_cpu: list[float] = []
    with tempfile.TemporaryDirectory(prefix="collect-bench-") as tmp:
        for round_index in range(args.rounds):
            order = ("collector", "raw") if round_index % 2 == 0 else ("raw", "collector")
            for side in order:
                cpu_started = time.process_time()
                if side == "collector":
                    collector_s.append(asyncio.run(run_collector(base_url, args, Path(tmp))))
                    collector_cpu.append(time.process_time() - cpu_started)
                else:
                    raw_s.append(asyncio.run(run_raw(base_url, args)))
                    raw_cpu.append(time.process_time() - cpu_started)
    collector_median = statistics.median(collector_s)
    raw_median = statistics.median(raw_s)
    collector_cpu_median = statistics.median(collector_cpu)
    raw_cpu_median = statistics.median(raw_cpu)
    episodes = args.groups * args.group_size
    return {
        "benchmark": "collect_overhead",
        "server": f"kiln-verify oracle serve {SERVER} (subprocess)",
        "groups": args.groups,
        "group_size": args.group_size,
        "steps_per_episode": args.steps,
        "concurrency": args.concurrency,
        "state_check": args.state_check,
        "episodes_per_round": episodes,
        "rounds": args.rounds,
        "collector_s": [round(value, 4) for value in collector_s],
        "raw_s": [round(value, 4) for value in raw_s],
        "collector_median_s": round(collector_median, 4),
        "raw_median_s": round(raw_median, 4),
        "collector_ms_per_episode": round(1e3 * collector_median / episodes, 3),
        "raw_ms_per_episode": round(1e3 * raw_median / episodes, 3),
        "ratio": round(collector_median / raw_median, 3),
        "collector_cpu_s": [round(value, 4) for value in collector_cpu],
        "raw_cpu_s": [round(value, 4) for value in raw_cpu],
        "collector_cpu_median_s": round(collector_cpu_median, 4),
        "raw_cpu_median_s": round(raw_cpu_median, 4),
        "cpu_ratio": round(collector_cpu_median / raw_cpu_median, 3),
        "target_ratio": TARGET_RATIO,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_plan_arguments(parser, groups=64, rounds=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-state-check",
        dest="state_check",
        action="store_false",
        help="collect with --no-state-check (and no state right after reset on the raw side)",
    )
    args = parser.parse_args(argv)
    if min(args.groups, args.group_size, args.steps, args.concurrency, args.rounds) < 1:
        parser.error("every count must be >= 1")
    server = start_server_process(oracle_command(SERVER), label=f"oracle-{SERVER}")
    try:
        result = measure(server.base_url, args)
    finally:
        server.stop()
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"collector {result['collector_median_s']:.3f} s "
            f"({result['collector_ms_per_episode']} ms/episode), raw "
            f"{result['raw_median_s']:.3f} s ({result['raw_ms_per_episode']} ms/episode), "
            f"ratio {result['ratio']:.3f}x (target <= {TARGET_RATIO}x); client CPU "
            f"{result['collector_cpu_median_s']:.3f} s vs {result['raw_cpu_median_s']:.3f} s, "
            f"ratio {result['cpu_ratio']:.3f}x\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
