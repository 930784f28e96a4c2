"""The Ray executor (``openenv rollout --executor ray``) with 2 local workers against the
single-process collector on the same plan.

One ``kiln-verify oracle serve bandit --port 0`` subprocess per environment latency (``--fault
delay-step=S``: 0 is a CPU-bound environment on this machine, a positive delay stands in for
an environment that answers slowly, where ranges collected side by side overlap their
waits). A local Ray cluster of ``--workers`` CPUs is started once (its start is reported on
its own), and a warm-up run lets its workers import the collector. Then, per delay, rounds
alternate the two sides on the same controls (the random policy, outputs replaced): the
library's ``run_collection`` and ``run_ray`` (split into ``--workers`` ranges, shards
returned through the object store, merged, verified, published). Every round checks that
the two bundles are the same bytes. Wall-clock medians and their ratio (ray / single) are
reported, with the machine's CPU count and load average before and after.

    python -m benchmarks.ray_executor [--groups 32 --group-size 4 --steps 8] [--rounds 3]
        [--delay-step 0 --delay-step 0.01] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
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

SERVER = "bandit"


def _single(controls: Any) -> tuple[float, Any]:
    from kiln_verify.openenv.collect import run_collection
    from kiln_verify.openenv.policy.random_policy import RandomPolicy

    start = time.perf_counter()
    bundle = asyncio.run(run_collection(controls, RandomPolicy()))
    return time.perf_counter() - start, bundle


def _ray(controls: Any, workers: int) -> tuple[float, Any]:
    from kiln_verify.openenv.collect.ray_executor import RaySettings, run_ray
    from kiln_verify.openenv.policy.random_policy import RandomPolicy

    start = time.perf_counter()
    bundle = run_ray(controls, RandomPolicy, RaySettings(workers=workers))
    return time.perf_counter() - start, bundle


def _files(bundle: Any) -> tuple[bytes, bytes, bytes]:
    return bundle.dataset, bundle.replay, bundle.summary


def _one_delay(delay: float, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    argv = oracle_command(SERVER)
    if delay > 0:
        argv += ["--fault", f"delay-step={delay:g}"]
    server = start_server_process(argv, label=f"oracle-{SERVER}")
    try:
        out = tmp / f"delay-{delay:g}"
        out.mkdir()
        controls = plan_controls(server.base_url, args, out)
        _ray(controls, args.workers)  # warm-up: the workers import the collector once
        single_s: list[float] = []
        ray_s: list[float] = []
        for index in range(args.rounds):
            order = ("single", "ray") if index % 2 == 0 else ("ray", "single")
            bundles = {}
            for side in order:
                if side == "single":
                    wall, bundles[side] = _single(controls)
                    single_s.append(wall)
                else:
                    wall, bundles[side] = _ray(controls, args.workers)
                    ray_s.append(wall)
            if _files(bundles["single"]) != _files(bundles["ray"]):
                raise RuntimeError("the Ray executor's bundle differs from the single-process one")
    finally:
        server.stop()
    single, spread = statistics.median(single_s), statistics.median(ray_s)
    return {
        "delay_step_s": delay,
        "single_s": [round(value, 4) for value in single_s],
        "ray_s": [round(value, 4) for value in ray_s],
        "single_median_s": round(single, 4),
        "ray_median_s": round(spread, 4),
        "ray_over_single": round(spread / single, 3),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    load_before = os.getloadavg()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    start = time.perf_counter()
    ray.init(
        num_cpus=args.workers,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    cluster_start = time.perf_counter() - start
    try:
        with tempfile.TemporaryDirectory(prefix="ray-bench-") as name:
            rows = [_one_delay(delay, args, Path(name)) for delay in args.delay_step]
    finally:
        ray.shutdown()
    return {
        "benchmark": "ray_executor",
        "server": f"kiln-verify oracle serve {SERVER} (subprocess)",
        "groups": args.groups,
        "group_size": args.group_size,
        "steps_per_episode": args.steps,
        "concurrency": args.concurrency,
        "workers": args.workers,
        "rounds": args.rounds,
        "ray_cluster_start_s": round(cluster_start, 3),
        "rows": rows,
        "cpu_count": os.cpu_count(),
        "load_before": [round(value, 2) for value in load_before],
        "load_after": [round(value, 2) for value in os.getloadavg()],
        "ray": ray.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_plan_arguments(parser, groups=32, rounds=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--delay-step", type=float, action="append", help="oracle step delay in s (repeat)"
    )
    parser.add_argument("--quick", action="store_true", help="a tiny plan, one round, no delay")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.group_size, args.steps, args.rounds = 4, 2, 2, 1
        args.delay_step = args.delay_step or [0.0]
    args.delay_step = args.delay_step or [0.0, 0.01]
    if min(args.group_size, args.steps, args.concurrency, args.rounds, args.workers) < 1:
        parser.error("every count must be >= 1")
    if args.groups < args.workers or min(args.delay_step) < 0:
        parser.error("--groups must be >= --workers and every --delay-step >= 0")
    try:
        import ray  # noqa: F401
    except ImportError:
        parser.error("needs the ray extra: pip install -e '.[ray]' -c constraints.txt")
    result = measure(args)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return 0
    for row in result["rows"]:
        sys.stdout.write(
            f"delay-step {row['delay_step_s']:g} s: single {row['single_median_s']:.3f} s, "
            f"ray x{result['workers']} {row['ray_median_s']:.3f} s "
            f"({row['ray_over_single']:.3f}x)\n"
        )
    sys.stdout.write(
        f"ray cluster start {result['ray_cluster_start_s']:.1f} s; {result['cpu_count']} CPUs, "
        f"load {result['load_before'][0]} -> {result['load_after'][0]}\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
