"""The test suite's wall time against another checkout's suite, in the same hour.

The development VM's speed swings by up to a factor of two within an hour (a fixed loop of
pure Python, json and sha256 took 0.87 to 2.02 s on one day), so one whole-suite time says as
much about the hour as about the suite. This benchmark runs two suites alternately, the
baseline's and the candidate's (B C C B B C ...), and reports their times side by side, the
ratio of their means and medians, their CPU (user + system of pytest and of every process it
reaped: workers, servers, ``train.py``), and the loop's time before and after each run so a
reader can see how fast the host was.

The baseline is another checkout with its own virtual environment, for example the commit
before issue 26, run serially as its README ran it::

    git worktree add /tmp/before 8b09eff
    cd /tmp/before && python3 -m venv .venv
    .venv/bin/pip install -e '.[dev,interop,train]' -c constraints.txt && cd -
    python -m benchmarks.suite_wall --baseline /tmp/before --rounds 2 --json

The candidate is this checkout run as ``scripts/check.sh`` runs pytest. ``--deselect-file``
drops node-id prefixes from the candidate's run only (tests that did not exist in the
baseline, to compare the same work); extra arguments after ``--`` go to both sides.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import children_cpu  # noqa: E402

#: The suite summary's counts (pytest's last line: "4291 passed, 11 skipped, ... in 410.44s").
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)\b")
#: What pytest exits with when it ran the suite: all passed, some failed, none collected.
_RAN = (0, 1, 5)


@dataclasses.dataclass(frozen=True)
class Side:
    """One suite: where it lives, which interpreter runs it, and pytest's arguments."""

    name: str
    root: Path
    python: Path
    pytest_args: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Run:
    side: str
    wall_s: float
    cpu_s: float
    exit: int
    counts: dict[str, int]
    calibration_s: tuple[float, float]

    @property
    def tests(self) -> int:
        return sum(n for key, n in self.counts.items() if key != "deselected")


def calibrate() -> float:
    """CPU seconds of a fixed loop (interpreter, json, sha256): the host's speed right now,
    about 1 s on the development VM at its fastest."""
    start = time.process_time()
    total = 0
    for i in range(2_000_000):
        total += i * i % 7
    rows = [{"a": i, "b": [str(i)] * 5} for i in range(10_000)]
    for _ in range(3):
        json.loads(json.dumps(rows))
    hashlib.sha256(b"x" * 20_000_000).hexdigest()
    return time.process_time() - start


def _environment() -> dict[str, str]:
    """The caller's environment without pytest's own markers (this may run inside a test)
    and with bytecode kept, as ``scripts/check.sh`` keeps it."""
    drop = ("PYTEST_", "PYTHONDONTWRITEBYTECODE")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def compile_tree(side: Side) -> None:
    """Byte-compile the side's packages first, as ``scripts/check.sh`` does, so neither run
    pays for compiling its own tree."""
    packages = [p for p in ("kiln_verify", "oracle", "pytest_kiln") if (side.root / p).is_dir()]
    if packages:
        subprocess.run([str(side.python), "-m", "compileall", "-q", "-j", "0", *packages],
                       cwd=side.root, env=_environment(), stdout=subprocess.DEVNULL, check=True)


def run_suite(side: Side, extra: Sequence[str], log: Path) -> Run:
    """One whole run of the side's suite; its output goes to ``log``, never to a pipe."""
    before = calibrate()
    command = [str(side.python), "-m", "pytest", *side.pytest_args, *extra]
    with log.open("wb") as out:
        start, cpu = time.perf_counter(), children_cpu()
        exit_code = subprocess.run(command, cwd=side.root, env=_environment(), stdout=out,
                                   stderr=subprocess.STDOUT, check=False).returncode
        wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    after = calibrate()
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    summary = next((line for line in reversed(lines) if _COUNT.search(line)), "")
    counts: dict[str, int] = {}
    for number, key in _COUNT.findall(summary):
        counts[key.rstrip("s") if key.startswith("error") else key] = int(number)
    return Run(side.name, round(wall, 2), round(cpu, 2), exit_code, counts,
               (round(before, 3), round(after, 3)))


def order(rounds: int) -> list[str]:
    """B C, then C B, then B C...: each side runs first as often as the other (up to one)."""
    pairs = [("baseline", "candidate"), ("candidate", "baseline")]
    return [name for i in range(rounds) for name in pairs[i % 2]]


def summarise(runs: Sequence[Run]) -> dict[str, Any]:
    sides: dict[str, dict[str, Any]] = {}
    for name in ("baseline", "candidate"):
        mine = [r for r in runs if r.side == name]
        walls, cpus = [r.wall_s for r in mine], [r.cpu_s for r in mine]
        sides[name] = {
            "runs": len(mine), "tests": mine[0].tests,
            "wall_mean_s": round(statistics.fmean(walls), 2),
            "wall_median_s": round(statistics.median(walls), 2),
            "cpu_mean_s": round(statistics.fmean(cpus), 2),
        }  # fmt: skip
    base, cand = sides["baseline"], sides["candidate"]
    return {
        "sides": sides,
        "wall_ratio": round(cand["wall_mean_s"] / base["wall_mean_s"], 3),
        "wall_median_ratio": round(cand["wall_median_s"] / base["wall_median_s"], 3),
        "cpu_ratio": round(cand["cpu_mean_s"] / base["cpu_mean_s"], 3),
        "wall_per_test_ratio": round(
            (cand["wall_mean_s"] / max(cand["tests"], 1))
            / (base["wall_mean_s"] / max(base["tests"], 1)), 3),
        "runs": [dataclasses.asdict(r) | {"tests": r.tests} for r in runs],
    }  # fmt: skip


def _check_workers() -> str:
    """``scripts/check.sh``'s worker count: one more than the cores this process may use."""
    return str(len(os.sched_getaffinity(0)) + 1)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite_wall",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True,
                        help="a checkout of the baseline commit (git worktree add DIR COMMIT)")
    parser.add_argument("--baseline-python", type=Path,
                        help="its interpreter (default: BASELINE/.venv/bin/python)")
    parser.add_argument("--baseline-args", default="-q -p no:cacheprovider",
                        help="pytest arguments of the baseline (default: serial, quiet)")
    parser.add_argument("--candidate", type=Path, default=REPO_ROOT)
    parser.add_argument("--candidate-python", type=Path, default=Path(sys.executable))
    parser.add_argument("--candidate-args",
                        default=f"-n {_check_workers()} --dist loadfile --no-loadscope-reorder -q",
                        help="pytest arguments of the candidate (default: scripts/check.sh's)")
    parser.add_argument("--deselect-file", type=Path,
                        help="node-id prefixes, one per line (# comments), left out of the "
                        "candidate's runs")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs (default 2)")
    parser.add_argument("--logs", type=Path, help="keep each run's output in this directory")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("extra", nargs="*", help="after --: pytest arguments for both sides")
    return parser


def _side(name: str, root: Path, python: Path | None, args: str) -> Side:
    root = root.resolve()
    interpreter = python if python is not None else root / ".venv" / "bin" / "python"
    if not (root / "tests").is_dir():
        raise SystemExit(f"suite_wall: {root} has no tests/ folder; pass a checkout of the "
                         f"project (git worktree add DIR COMMIT)")
    if not interpreter.exists():
        raise SystemExit(f"suite_wall: {interpreter} does not exist; create the {name}'s "
                         f"virtual environment or pass --{name}-python")
    return Side(name, root, interpreter, tuple(shlex.split(args)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    baseline = _side("baseline", options.baseline, options.baseline_python,
                     options.baseline_args)
    candidate = _side("candidate", options.candidate, options.candidate_python,
                      options.candidate_args)
    if options.deselect_file is not None:
        lines = options.deselect_file.read_text(encoding="utf-8").splitlines()
        prefixes = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
        candidate = dataclasses.replace(candidate, pytest_args=candidate.pytest_args + tuple(
            arg for prefix in prefixes for arg in ("--deselect", prefix)))
    sides = {"baseline": baseline, "candidate": candidate}
    for side in sides.values():
        compile_tree(side)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="suite-wall-") as scratch:
        logs = options.logs if options.logs is not None else Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        for i, name in enumerate(order(options.rounds)):
            run = run_suite(sides[name], options.extra, logs / f"{i:02d}-{name}.log")
            runs.append(run)
            if not options.json:
                print(f"{name:9} wall {run.wall_s:8.1f} s  cpu {run.cpu_s:8.1f} s  "
                      f"exit {run.exit}  {run.counts}  calibration {run.calibration_s}",
                      flush=True)
    report = summarise(runs)
    if options.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"candidate / baseline: wall {report['wall_ratio']} (medians "
              f"{report['wall_median_ratio']}), CPU {report['cpu_ratio']}, wall per test "
              f"{report['wall_per_test_ratio']}")
    # A run that failed tests still measured the suite; one that did not run it did not.
    return 0 if all(r.exit in _RAN for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
