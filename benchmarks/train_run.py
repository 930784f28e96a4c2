"""A server-owned train run against the same steps run by hand with the CLI.

One oracle bandit and the tiny model warm-started on valid bandit actions (as
tests/control/train/conftest.py builds it: a random tiny model never emits a valid action,
so every reward would be the same penalty and training selection would keep nothing).

* **Server**: ``kiln-verify serve --model MODEL`` as a real process runs one ``kind=train``
  request with a diagnostic ``environment_eval`` (no gate). The split comes from what the
  server records, observed from outside: ``admission`` is the ``POST``'s round trip (it
  loads the resident model on first use); the other boundaries are the first poll of
  ``GET /v1/openenv/runs/ID`` that shows each state (``submitting``, ``training_queued``,
  ``environment_evaluating``), the trainer's own start and end in ``train_receipt``
  (``trainer.finished_unix_ms``) and the run's ``finished_unix_ms``. ``collection`` is
  collection, selection and publication; ``import`` is the completed-result verification,
  the quarantined PEFT import and the evidence; ``evaluation`` includes the promotion.
  Polling adds at most ``--poll`` seconds of error to each boundary.
* **By hand**: each step as its own ``kiln-verify`` (or ``train.py``) process with the
  run's sizes and settings: ``openenv rollout --policy transformers --grpo-output``,
  ``hf export-grpo`` (of the rollout's GRPO rows whose rewards differ: the server's §5.7
  selection, applied untimed because no CLI step does it), the bundle's ``train.py`` with
  the options the run's sealed contract gave its trainer, ``hf verify --completed`` +
  ``hf import-peft``, ``openenv evaluate`` (baseline: the model; candidate: the imported
  adapter) on the same held-out seeds. There is no admission by hand; each process imports
  torch and loads its own model (counted in its step).

Each stage is reported in wall and CPU seconds: the server's CPU is its process's and its
reaped children's (the trainer) from ``/proc``, sampled at every poll and read at the same
boundaries; a hand step's is its child's ``RUSAGE_CHILDREN``. CPU is the steadier number on
a shared box: contention stretches wall time, and more so where torch's threads spin.
``ratio`` is server / hand, per stage and in total (target: total wall at most 1.10).
Server start-up is reported apart (paid once per server, not per run). Both sides run on
this machine in this one command, server first.

``--environment URL`` runs both sides against a bandit oracle that is already serving (a
test's) instead of starting one; the oracle is deterministic, so the runs are the same.

    python -m benchmarks.train_run --json
    python -m benchmarks.train_run --quick --model DIR --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import running, start_oracle_process  # noqa: E402
from benchmarks._train_sides import (  # noqa: E402
    STAGES,
    cli,
    hand_run,
    server_run,
)


def build_model(root: Path, bandit_url: str, steps: int) -> Path:
    """The tiny model warm-started for ``steps`` steps on a seeded random bandit corpus."""
    from kiln_verify.testing.tiny_model import build_tiny_model, warm_start

    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [*cli(), "openenv", "rollout", "--environment", bandit_url, "--policy", "random",
         "--groups", "6", "--group-size", "2", "--max-steps", "1", "--seed-start", "1000",
         "--no-thinking", "--output", str(root / "boot.rollouts.jsonl"),
         "--replay-output", str(root / "boot.replay.json"),
         "--summary-output", str(root / "boot.summary.json")],
        check=True, stdout=subprocess.DEVNULL, cwd=REPO_ROOT,
    )  # fmt: skip
    model = root / "model"
    build_tiny_model(model)
    warm_start(model, root / "boot.rollouts.jsonl", steps=steps)
    return model


def _ratio(server: float, hand: float | None) -> float | None:
    return round(server / hand, 3) if hand else None


def _compare(server: dict[str, float], hand: dict[str, float | None]) -> dict[str, Any]:
    """Totals and server / hand per stage and in total."""
    totals = (sum(server.values()), sum(v for v in hand.values() if v is not None))
    ratios = {name: _ratio(server[name], hand[name]) for name in STAGES}
    return {
        "server_total": round(totals[0], 3),
        "hand_total": round(totals[1], 3),
        "ratio": {**ratios, "total": _ratio(*totals)},
    }


@contextlib.contextmanager
def _bandit(url: str | None) -> Iterator[str]:
    """``url`` (a bandit oracle already serving), or a bandit of our own for the duration."""
    if url is not None:
        yield url
        return
    with running(start_oracle_process("bandit", max_sessions=2)) as bandit:
        yield bandit.base_url


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    with _bandit(args.environment) as bandit_url:
        start = time.perf_counter()
        model = args.model or build_model(work / "build", bandit_url, args.warm_steps)
        built = time.perf_counter() - start
        server, status = server_run(args, bandit_url, model, work / "server")
        (work / "hand").mkdir()
        hand = hand_run(args, bandit_url, model, status, work / "hand")
    selection = (status.get("training") or {}).get("training_data") or {}
    return {
        "benchmark": "train_run",
        "shape": {
            "groups": args.groups,
            "group_size": args.group_size,
            "eval_groups": args.eval_groups,
            "server_groups_trained": selection.get("rows"),
            "hand_groups_trained": hand.pop("grpo_groups"),
        },
        "model_build_s": None if args.model else round(built, 2),
        "server": server,
        "hand": hand,
        "wall": _compare(server["stages_s"], hand["stages_s"]),
        "cpu": _compare(server["stages_cpu_s"], hand["stages_cpu_s"]),
        "gate_outcome": (status.get("environment_evaluation") or {}).get("outcome"),
        "load_1min": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(report: dict[str, Any]) -> str:
    server, hand, wall, cpu = (report[k] for k in ("server", "hand", "wall", "cpu"))
    head = ("stage", "server s", "hand s", "ratio", "server cpu", "hand cpu", "cpu ratio")
    lines = ["".join(f"{h:>11}" for h in head)]
    for name in STAGES:
        row = (
            server["stages_s"][name],
            hand["stages_s"][name],
            wall["ratio"][name],
            server["stages_cpu_s"][name],
            hand["stages_cpu_s"][name],
            cpu["ratio"][name],
        )
        lines.append(f"{name:>11}" + "".join(f"{_cell(v):>11}" for v in row))
    total = (
        wall["server_total"],
        wall["hand_total"],
        wall["ratio"]["total"],
        cpu["server_total"],
        cpu["hand_total"],
        cpu["ratio"]["total"],
    )
    lines.append(f"{'total':>11}" + "".join(f"{_cell(v):>11}" for v in total))
    lines.append(
        f"server start-up {server['startup_s']:.2f} s (not in the totals); server process "
        f"CPU with start-up {server['cpu_s']} s"
    )
    lines.append(f"shape {report['shape']}, load {report['load_1min']} on {report['cpus']} CPUs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--groups", type=int, default=16, help="training groups")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--eval-groups", type=int, default=20, help="held-out groups")
    parser.add_argument("--warm-steps", type=int, default=40, help="warm-start steps")
    parser.add_argument("--quick", action="store_true", help="4 groups of 2, 2 held out")
    parser.add_argument("--model", type=Path, default=None, help="a warm-started model DIR")
    parser.add_argument(
        "--environment", default=None, help="a bandit oracle's URL (default: start one)"
    )
    parser.add_argument("--poll", type=float, default=0.1, help="status poll interval (s)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per run (s)")
    parser.add_argument("--tmpdir", type=Path, default=None, help="where the scratch goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.group_size, args.eval_groups = 4, 2, 2
    if args.groups < 1 or args.group_size < 2 or args.eval_groups < 1:
        parser.error("--groups >= 1, --group-size >= 2, --eval-groups >= 1")
    if args.model is not None:
        args.model = args.model.resolve()
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        report = measure(args, Path(tmp))
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
