"""``verify-run`` on a run directory versus ``sha256sum`` over the same files.

Synthesizes a run directory as ``openenv artifact RUN_ID --all`` writes one: a consistent
bundle (scripted deterministic episodes, kiln_verify/testing/bundles.py) at the layout's
names and a v5 ``run.json`` whose manifest lists the three files. The bundle is most of
a run's bytes: a train run adds two small evidence files and the two evaluation bundles,
which the same verifier reads the same way. Two sizes (``--groups`` and
``--small-fraction`` of it), each measured in this one command:

* ``sha256sum`` over every file of the directory (subprocess; best wall and CPU time of
  ``--rounds``);
* :func:`kiln_verify.openenv.runcheck.engine.verify_run` in a fresh child process (best
  wall and CPU time; interpreter start-up and imports not timed): ``ratio``, ``cpu_ratio``;
* the CLI, ``kiln-verify openenv verify-run DIR``, as a whole subprocess (``cli_ratio``:
  start-up and imports included, as a user meets it);
* the bundle verifier alone on the same bundle (``verify_bundle``, fresh child), so
  ``run_over_bundle_cpu`` is what the run-level links add to verifying the bundle.

    python -m benchmarks.verify_run --json
    python -m benchmarks.verify_run --groups 64 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import best_child, best_of, kiln_verify_script  # noqa: E402
from kiln_verify.control.layout import ARTIFACT_PATHS, RUN_STATUS_FILE  # noqa: E402
from kiln_verify.core.digest import hash_file  # noqa: E402
from kiln_verify.core.jsonio import dumps_pretty  # noqa: E402
from kiln_verify.limits import MAX_OPENENV_DATASET_BYTES  # noqa: E402
from kiln_verify.testing.bundles import build_fixture_bundle  # noqa: E402

GROUP_SIZE = 8
RUN_ID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"

_CHILD = """
import sys, time
from kiln_verify.openenv.runcheck.engine import verify_run
start, cpu = time.perf_counter(), time.process_time()
report = verify_run(sys.argv[1])
assert report.run_id is not None
print(time.perf_counter() - start, time.process_time() - cpu)
"""

_BUNDLE_CHILD = """
import sys, time
from kiln_verify.openenv.verify import verify_bundle
start, cpu = time.perf_counter(), time.process_time()
verify_bundle(sys.argv[1] + "/openenv.rollout-summary.json")
print(time.perf_counter() - start, time.process_time() - cpu)
"""


def synthesize(directory: Path, *, groups: int, pad: int) -> list[Path]:
    """A rollout run directory of ``groups`` groups; its files (``run.json`` last)."""
    build_fixture_bundle(directory, groups=groups, group_size=GROUP_SIZE, pad=pad)
    files = [directory / ARTIFACT_PATHS[kind] for kind in ("dataset", "replay", "summary")]
    artifacts = []
    for kind, path in zip(("dataset", "replay", "summary"), files, strict=True):
        digest = hash_file(path, max_bytes=MAX_OPENENV_DATASET_BYTES)
        artifacts.append(
            {
                "kind": kind,
                "url": f"/v1/openenv/runs/{RUN_ID}/artifacts/{kind}",
                "sha256": str(digest.sha256),
                "bytes": digest.size_bytes,
            }
        )
    rollouts = groups * GROUP_SIZE
    status = {
        "schema": "kiln.openenv-run.v5",
        "run_id": RUN_ID,
        "kind": "rollout",
        "state": "rollout_ready",
        "request": {"environment_urls": ["http://127.0.0.1:9"], "groups": groups},
        "submitted_unix_ms": 1,
        "admission": {"max_active_runs": 4, "sequence": 1},
        "progress": {
            "groups_completed": groups,
            "groups_total": groups,
            "rollouts_completed": rollouts,
            "rollouts_total": rollouts,
        },
        "artifacts": artifacts,
    }
    (directory / RUN_STATUS_FILE).write_bytes(dumps_pretty(status))
    return [*files, directory / RUN_STATUS_FILE]


def time_sha256sum(files: list[Path], rounds: int) -> tuple[float, float]:
    return best_of(["sha256sum", *map(str, files)], rounds)


def time_cli(directory: Path, rounds: int) -> float:
    return best_of([kiln_verify_script(), "openenv", "verify-run", str(directory)], rounds)[0]


def measure(directory: Path, files: list[Path], rounds: int) -> dict[str, Any]:
    total = sum(path.stat().st_size for path in files)
    sha, sha_cpu = time_sha256sum(files, rounds)
    verify, verify_cpu = best_child(_CHILD, str(directory), rounds)
    bundle, bundle_cpu = best_child(_BUNDLE_CHILD, str(directory), rounds)
    cli = time_cli(directory, rounds)
    return {
        "files": len(files),
        "total_mib": round(total / 2**20, 2),
        "sha256sum_s": round(sha, 4),
        "verify_run_s": round(verify, 4),
        "ratio": round(verify / sha, 2),
        "sha256sum_cpu_s": round(sha_cpu, 4),
        "verify_run_cpu_s": round(verify_cpu, 4),
        "cpu_ratio": round(verify_cpu / sha_cpu, 2) if sha_cpu > 0 else None,
        "cli_s": round(cli, 4),
        "cli_ratio": round(cli / sha, 2),
        "verify_bundle_s": round(bundle, 4),
        "verify_bundle_cpu_s": round(bundle_cpu, 4),
        "run_over_bundle_cpu": round(verify_cpu / bundle_cpu, 2) if bundle_cpu > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--groups", type=int, default=1024, help="groups of 8 (large run)")
    parser.add_argument("--pad", type=int, default=4096, help="observation padding (chars)")
    parser.add_argument("--small-fraction", type=float, default=0.25)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tmpdir", type=Path, default=None, help="where the scratch goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.groups < 2 or args.rounds < 1 or not 0 < args.small_fraction <= 1:
        parser.error("--groups >= 2, --rounds >= 1, --small-fraction in (0, 1]")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        for label, groups in (
            ("small", max(2, int(args.groups * args.small_fraction))),
            ("large", args.groups),
        ):
            directory = Path(tmp) / label
            start = time.perf_counter()
            files = synthesize(directory, groups=groups, pad=args.pad)
            built = time.perf_counter() - start
            row = {"groups": groups, "build_s": round(built, 2)}
            results[label] = {**row, **measure(directory, files, args.rounds)}
            shutil.rmtree(directory)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for label, row in results.items():
            print(f"{label}: {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
