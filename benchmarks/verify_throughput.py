"""Offline verification throughput and memory versus ``sha256sum`` over the same files.

Synthesizes two consistent bundles (scripted deterministic episodes, see
tests/verify/bundles.py) at ``--scale`` and ``--scale * --small-fraction``, then for each:

* times ``sha256sum`` over the three files (subprocess wall time, best of ``--rounds``);
* times :func:`kiln_verify.openenv.verify.verify_bundle` inside a fresh child process
  (best of ``--rounds``; interpreter start-up and imports are not timed);
* reports both wall time (``ratio``) and CPU time (``cpu_ratio``: user + system of
  ``sha256sum``, ``process_time`` of the verifying child), the latter being what a
  loaded machine distorts least;
* measures the verifying child's peak RSS with ``getrusage(RUSAGE_CHILDREN).ru_maxrss``
  in a fresh wrapper process per measurement.

``--scale 1`` is 2,048 groups x 8 candidates (16,384 rollouts = the contract's
``MAX_ROLLOUTS``) with 512 characters of padding per observation: a corpus of about
31 MiB, a replay of about 32 MiB and a summary of about 7 MiB (70 MiB in all, about an
eighth of the 256 MiB per-file caps; generation takes a few seconds). Scales above 1 keep
the rollout count and grow the padding (``--scale 8`` approaches the caps); scales below 1
shrink the group count.

    python -m benchmarks.verify_throughput --scale 1 --json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.verify.bundles import Bundle, build_bundle  # noqa: E402

GROUPS = 2048
GROUP_SIZE = 8
PAD = 512

_CHILD = """
import sys, time
from kiln_verify.openenv.verify import verify_bundle
start, cpu = time.perf_counter(), time.process_time()
report = verify_bundle(sys.argv[1])
print(time.perf_counter() - start, time.process_time() - cpu)
"""

_WRAPPER = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], check=True,
               stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def synthesize(directory: Path, scale: float) -> Bundle:
    groups = max(2, int(GROUPS * min(scale, 1.0)))
    pad = int(PAD * max(scale, 1.0))
    return build_bundle(directory, groups=groups, group_size=GROUP_SIZE, pad=pad)


def _files(bundle: Bundle) -> list[str]:
    return [str(bundle.dataset), str(bundle.replay), str(bundle.summary)]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_sha256sum(bundle: Bundle, rounds: int) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system) of ``sha256sum`` over the files."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(rounds):
        start, cpu = time.perf_counter(), _children_cpu()
        subprocess.run(["sha256sum", *_files(bundle)], check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, _children_cpu() - cpu)
    return best, best_cpu


def time_verify(bundle: Bundle, rounds: int) -> tuple[float, float]:
    """Best wall time and best CPU time of ``verify_bundle`` in a fresh child process.

    CPU time is what a loaded machine distorts least (other processes' time slices do
    not count); both are reported.
    """
    best, best_cpu = float("inf"), float("inf")
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(bundle.summary)],
            check=True,
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        )
        wall, cpu = (float(part) for part in out.stdout.split())
        best, best_cpu = min(best, wall), min(best_cpu, cpu)
    return best, best_cpu


def peak_rss_kib(bundle: Bundle) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, _CHILD, str(bundle.summary)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    return int(out.stdout.strip())


def measure(bundle: Bundle, rounds: int) -> dict[str, Any]:
    sizes = {
        name: Path(path).stat().st_size
        for name, path in zip(("dataset", "replay", "summary"), _files(bundle), strict=True)
    }
    sha, sha_cpu = time_sha256sum(bundle, rounds)
    verify, verify_cpu = time_verify(bundle, rounds)
    return {
        "bytes": sizes,
        "total_mib": round(sum(sizes.values()) / 2**20, 2),
        "sha256sum_s": round(sha, 4),
        "verify_s": round(verify, 4),
        "ratio": round(verify / sha, 2),
        "sha256sum_cpu_s": round(sha_cpu, 4),
        "verify_cpu_s": round(verify_cpu, 4),
        "cpu_ratio": round(verify_cpu / sha_cpu, 2) if sha_cpu > 0 else None,
        "peak_rss_mib": round(peak_rss_kib(bundle) / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--small-fraction", type=float, default=0.25)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, scale in (("small", args.scale * args.small_fraction), ("large", args.scale)):
            start = time.perf_counter()
            bundle = synthesize(Path(tmp) / label, scale)
            built = time.perf_counter() - start
            results[label] = {
                "scale": scale,
                "build_s": round(built, 2),
                **measure(bundle, args.rounds),
            }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for label, row in results.items():
            print(f"{label}: {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
