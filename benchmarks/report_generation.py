"""Bundle report generation versus offline verification of the same bundle.

The report runs the verifier once (with an observer gathering its facts) and renders the
page, so its cost should be verification plus a little (target: at most 1.2x, issue 19).
Bundles are the verify benchmark's (:mod:`benchmarks.verify_throughput`): ``max``, at the
contract's maximum sizes (16,384 rollouts, corpus and replay at ``--fill`` of their 256 MiB
caps), and ``dense``, the same rollout count with small records (the per-record worst case).

In one fresh child process per bundle, after one untimed warm-up of each (imports, page
cache), the two are timed alternately, ``--rounds`` times each, and the best of each is
kept: :func:`kiln_verify.openenv.verify.verify_bundle` against
:func:`kiln_verify.report.engine.bundle_report` (HTML, rendered to bytes; writing the file is
not timed, as verification writes nothing). ``ratio`` is report / verify in wall time,
``cpu_ratio`` in CPU time (what a loaded machine distorts least).

    python -m benchmarks.report_generation --json
    python -m benchmarks.report_generation --shape dense --scale 0.25
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import verify_throughput  # noqa: E402

_CHILD = """
import json, sys, time
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.report.engine import bundle_report
summary, rounds = sys.argv[1], int(sys.argv[2])
verify_bundle(summary)
size = len(bundle_report(summary).data)
best = dict.fromkeys(("verify", "report", "verify_cpu", "report_cpu"), float("inf"))
for _ in range(rounds):
    for name, work in (("verify", verify_bundle), ("report", bundle_report)):
        start, cpu = time.perf_counter(), time.process_time()
        work(summary)
        best[name] = min(best[name], time.perf_counter() - start)
        best[name + "_cpu"] = min(best[name + "_cpu"], time.process_time() - cpu)
print(json.dumps({**best, "report_bytes": size}))
"""


def measure(summary: Path, rounds: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(summary), str(rounds)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    row = json.loads(out.stdout)
    return {
        "verify_s": round(row["verify"], 4),
        "report_s": round(row["report"], 4),
        "ratio": round(row["report"] / row["verify"], 3),
        "verify_cpu_s": round(row["verify_cpu"], 4),
        "report_cpu_s": round(row["report_cpu"], 4),
        "cpu_ratio": round(row["report_cpu"] / row["verify_cpu"], 3),
        "report_bytes": row["report_bytes"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("max", "dense", "both"), default="both")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the groups")
    parser.add_argument("--fill", type=float, default=0.97, help="of the 256 MiB caps")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shapes = ("max", "dense") if args.shape == "both" else (args.shape,)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            pads = (
                verify_throughput.max_size_pads(Path(tmp) / "probe", args.fill)
                if shape == "max"
                else None
            )
            start = time.perf_counter()
            directory = Path(tmp) / shape
            bundle = verify_throughput.synthesize(
                directory, shape=shape, fraction=args.scale, pads=pads
            )
            row: dict[str, Any] = {
                "scale": args.scale,
                "build_s": round(time.perf_counter() - start, 2),
                "rollouts": json.loads(bundle.summary.read_bytes())["rollout_count"],
                "total_mib": round(
                    sum(p.stat().st_size for p in (bundle.dataset, bundle.replay, bundle.summary))
                    / 2**20,
                    2,
                ),
            }
            results[shape] = {**row, **measure(bundle.summary, args.rounds)}
            shutil.rmtree(directory)  # half a GiB: keep at most one on disk
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for label, row in results.items():
            print(f"{label}: {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
