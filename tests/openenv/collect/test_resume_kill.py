"""``openenv rollout --journal DIR --resume``: SIGKILL at random points, resume, same bytes.

A chain of ``kiln-verify openenv rollout`` children, each killed with SIGKILL after a
random delay (anywhere: start-up, inspection, mid-group, while an entry or the seal is
written, while the bundle is published, after it was published) and the next started
with ``--resume``, until one finishes; its bundle must be byte for byte the bundle of an
uninterrupted collection with the same controls. Chains are run until at least
``KILLS`` children were killed. The children are forked by a server that imported the
CLI once (``forkserver``): a child is the console script's ``main()`` in its own process,
without a second of imports each. The oracle is the collector tests' session server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiln_verify.openenv.collect import build_bundle, collect
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from oracle.runner import ServerHandle
from tests.openenv.collect.options import make_controls

KILLS = 30
GROUPS = 24
NAMES = ("openenv.rollouts.jsonl", "openenv.replay.json", "openenv.rollout-summary.json")
ROOT = Path(__file__).resolve().parents[3]


class ForkServer:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.openenv.collect.forkserver"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _answer(self) -> dict[str, int | float]:
        assert self.process.stdout is not None
        answer: dict[str, int | float] = json.loads(self.process.stdout.readline())
        return answer

    def start(self, cwd: Path, argv: list[str], out: Path) -> int:
        assert self.process.stdin is not None
        request = {"cwd": str(cwd), "argv": argv, "out": str(out)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return int(self._answer()["pid"])

    def wait(self) -> int:
        return int(self._answer()["status"])

    def cpu(self) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        return float(self._answer()["cpu"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def forks() -> Iterator[ForkServer]:
    server = ForkServer()
    yield server
    server.close()


def _reference(url: str) -> list[bytes]:
    """The uninterrupted bundle: relative output names, as the children record them."""
    controls = make_controls([url], groups=GROUPS, group_size=2, max_steps=3)
    bundle = build_bundle(asyncio.run(collect(controls, RandomPolicy())))
    return [bundle.dataset, bundle.replay, bundle.summary]


def _entries(journal: Path) -> int:
    return len(os.listdir(journal)) if journal.is_dir() else -1


def _kill_after(pid: int, delay: float) -> None:
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):  # it finished first
        os.kill(pid, signal.SIGKILL)


def test_sigkill_at_random_points_then_resume_publishes_the_same_bytes(
    servers: dict[str, ServerHandle], forks: ForkServer, tmp_path: Path
) -> None:
    started = time.process_time()
    url = servers["bandit"].base_url
    expected = _reference(url)
    argv = ["openenv", "rollout", "--environment", url, "--groups", str(GROUPS)]
    argv += ["--group-size", "2", "--max-steps", "3", "--journal", "journal", "--json"]
    rng = random.Random(30)
    kills = chains = 0
    outcomes: list[int] = []
    while kills < KILLS:
        chains += 1
        run = tmp_path / f"chain-{chains}"
        run.mkdir()
        resume: list[str] = []
        stalls = 0  # kills in a row that found no new entry: a loaded machine starts slowly
        while True:
            child = len(outcomes)
            before = _entries(run / "journal")
            pid = forks.start(run, argv + resume, run / f"child-{child}.out")
            _kill_after(pid, rng.uniform(0.0, 0.4) * (1 + stalls))
            status = forks.wait()
            outcomes.append(status)
            resume = ["--resume"]
            if status == 0:
                break
            if status != -signal.SIGKILL:  # (a child killed at once has no output file)
                text = (run / f"child-{child}.out").read_text()
                raise AssertionError(f"child {child} exited {status}: {text}")
            kills += 1
            stalls = stalls + 1 if _entries(run / "journal") == before else 0
            assert len(outcomes) < 400, "the chains make no progress"
        for name, data in zip(NAMES, expected, strict=True):
            assert (run / name).read_bytes() == data, f"chain {chains}: {name} differs"
    cpu = time.process_time() - started + forks.cpu()
    print(f"\n{kills} kills in {chains} chains, {len(outcomes)} children, {cpu:.1f} s CPU")
    assert kills >= KILLS
