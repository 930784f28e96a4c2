"""Journal overhead and merge cost: ``--journal`` against the same collection without one,
and ``openenv merge`` against offline verification of the bundle it publishes.

Both collection sides run the library's collector (a zero-cost scripted policy) against one
``kiln-verify oracle serve bandit --port 0`` subprocess and publish the bundle into a
temporary directory; the journaled side also writes (and fsyncs) one entry per group, the
header and the seal, into a fresh journal each round. A round is one pair, the two sides back
to back in alternating order; the statistic is the median over rounds of the pair's ratio
(journaled / plain, target at most 1.05x), of wall time and of client CPU time
(``time.process_time``: the server is a subprocess). A pair shares the box's state of the
moment, so the ratio of a pair is steadier than the ratio of two medians taken across a
drifting VM (both are reported). Then the plan is collected
as two shards (``--groups-range``) and the merge (every shard read and checked, the bundle
built and published) is timed against ``verify_bundle`` on the merged bundle; the merged
bytes are checked equal to the plain bundle's.

    python -m benchmarks.journal_overhead --groups 64 --group-size 4 --rounds 31 [--json]
        [--tmpdir DIR]  (DIR's file system decides what an fsync costs)
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import (
    BUNDLE_NAMES,
    add_plan_arguments,
    oracle_command,
    plan_controls,
    start_server_process,
)

TARGET_RATIO = 1.05
SERVER = "bandit"
_ACTIONS = tuple(json.dumps({"arm": arm}) for arm in range(10))


def _policy() -> Any:
    from kiln_verify.openenv.policy.scripted import ScriptedPolicy

    return ScriptedPolicy(lambda request: _ACTIONS[request.step_index % 10], name="bench")


def _timed(work: Callable[[], Any]) -> tuple[float, float, Any]:
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _collections(base_url: str, args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    from kiln_verify.openenv.collect import run_collection
    from kiln_verify.openenv.collect.journaled import run_journaled

    out = tmp / "out"
    out.mkdir()
    controls = plan_controls(base_url, args, out)
    times: dict[str, list[float]] = {
        "plain": [],
        "journaled": [],
        "plain_cpu": [],
        "journal_cpu": [],
    }
    for index in range(args.rounds):
        order = ("plain", "journaled") if index % 2 == 0 else ("journaled", "plain")
        for side in order:
            if side == "plain":
                wall, cpu, _ = _timed(lambda: asyncio.run(run_collection(controls, _policy())))
                times["plain"].append(wall)
                times["plain_cpu"].append(cpu)
            else:
                journal = tmp / f"journal-{index}"
                wall, cpu, _ = _timed(
                    lambda: asyncio.run(run_journaled(controls, _policy(), journal))  # noqa: B023
                )
                times["journaled"].append(wall)
                times["journal_cpu"].append(cpu)
    return times


def _merge(base_url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from kiln_verify.openenv.collect.journaled import run_journaled
    from kiln_verify.openenv.collect.merge import merge_shards, publish_merged
    from kiln_verify.openenv.verify import verify_bundle

    controls = plan_controls(base_url, args, tmp / "out")
    half = args.groups // 2
    shards = [tmp / "shard-a", tmp / "shard-b"]
    for shard, span in zip(shards, (range(0, half), range(half, args.groups)), strict=True):
        asyncio.run(run_journaled(controls, _policy(), shard, groups=span))
    merge_s: list[float] = []
    verify_s: list[float] = []
    for index in range(args.rounds):
        target = tmp / f"merged-{index}"
        target.mkdir()

        def merge(target: Path = target) -> Any:
            merged_controls, bundle = merge_shards(shards)
            return publish_merged(merged_controls, bundle, target)

        wall, _, paths = _timed(merge)
        merge_s.append(wall)
        wall, _, _ = _timed(lambda: verify_bundle(paths[2]))  # noqa: B023
        verify_s.append(wall)
        same = all(
            (target / name).read_bytes() == (tmp / "out" / name).read_bytes()
            for name in BUNDLE_NAMES
        )
        if not same:
            raise RuntimeError("the merged bundle differs from the single-host bundle")
    return {
        "merge_s": [round(value, 4) for value in merge_s],
        "verify_s": [round(value, 4) for value in verify_s],
        "merge_median_s": round(statistics.median(merge_s), 4),
        "verify_median_s": round(statistics.median(verify_s), 4),
        "merge_over_verify": round(statistics.median(merge_s) / statistics.median(verify_s), 3),
    }


def measure(base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="journal-bench-", dir=args.tmpdir) as name:
        tmp = Path(name)
        times = _collections(base_url, args, tmp)
        merged = _merge(base_url, args, tmp)
    plain, journaled = statistics.median(times["plain"]), statistics.median(times["journaled"])
    plain_cpu = statistics.median(times["plain_cpu"])
    journal_cpu = statistics.median(times["journal_cpu"])
    pair_wall = [j / p for j, p in zip(times["journaled"], times["plain"], strict=True)]
    pair_cpu = [j / p for j, p in zip(times["journal_cpu"], times["plain_cpu"], strict=True)]
    return {
        "benchmark": "journal_overhead",
        "server": f"kiln-verify oracle serve {SERVER} (subprocess)",
        "groups": args.groups,
        "group_size": args.group_size,
        "steps_per_episode": args.steps,
        "rounds": args.rounds,
        "plain_s": [round(value, 4) for value in times["plain"]],
        "journaled_s": [round(value, 4) for value in times["journaled"]],
        "plain_median_s": round(plain, 4),
        "journaled_median_s": round(journaled, 4),
        "ratio": round(statistics.median(pair_wall), 3),
        "ratio_of_medians": round(journaled / plain, 3),
        "pair_ratios": [round(value, 3) for value in pair_wall],
        "plain_cpu_median_s": round(plain_cpu, 4),
        "journaled_cpu_median_s": round(journal_cpu, 4),
        "cpu_ratio": round(statistics.median(pair_cpu), 3),
        "cpu_ratio_of_medians": round(journal_cpu / plain_cpu, 3),
        "target_ratio": TARGET_RATIO,
        "tmpdir": args.tmpdir or tempfile.gettempdir(),
        **merged,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_plan_arguments(parser, groups=64, rounds=31)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--tmpdir", default=None, help="where the bundles and journals go (its file system's fsync)"
    )
    args = parser.parse_args(argv)
    if min(args.group_size, args.steps, args.concurrency, args.rounds) < 1 or args.groups < 2:
        parser.error("every count must be >= 1 and --groups >= 2 (two shards)")
    server = start_server_process(oracle_command(SERVER), label=f"oracle-{SERVER}")
    try:
        result = measure(server.base_url, args)
    finally:
        server.stop()
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"plain {result['plain_median_s']:.3f} s, journaled "
            f"{result['journaled_median_s']:.3f} s, median pair ratio {result['ratio']:.3f}x "
            f"(target <= {TARGET_RATIO}x; client CPU {result['cpu_ratio']:.3f}x); merge "
            f"{result['merge_median_s']:.3f} s vs offline verification "
            f"{result['verify_median_s']:.3f} s ({result['merge_over_verify']:.3f}x)\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
