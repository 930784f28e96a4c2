"""The two sides of benchmarks/train_run.py: one ``kind=train`` run on a real
``kiln-verify serve --model`` process, timed from outside, and the same steps run by hand
as ``kiln-verify`` (and ``train.py``) processes. Each side reports wall and CPU seconds per
stage (benchmarks/train_run.py says what each stage covers)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import children_cpu
from kiln_verify.testing.serve import READY_LINE

REPO_ROOT = Path(__file__).resolve().parents[1]

STAGES = ("admission", "collection", "export", "training", "import", "evaluation")
OUTPUT = "bandit-grpo.v1"
CLI = "from kiln_verify.cli import main; main()"
#: The states of a train run with an evaluation, in order (kinds/train_stages.py).
ORDER = ("submitting", "training_queued", "training_running", "environment_evaluating",
         "completed")  # fmt: skip
TERMINAL = {"completed", "failed", "cancelled"}
#: The trainer child's environment on the server (kinds/trainer_child.py); the hand run's too.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


def _now_ms() -> float:
    return time.time() * 1000.0


def cli() -> list[str]:
    script = Path(sys.executable).with_name("kiln-verify")
    return [str(script)] if script.exists() else [sys.executable, "-c", CLI]


def request_body(args: argparse.Namespace, bandit_url: str) -> dict[str, Any]:
    return {
        "kind": "train",
        "environment_urls": [bandit_url],
        "output_adapter": OUTPUT,
        "groups": args.groups,
        "group_size": args.group_size,
        "seed_start": 0,
        "max_steps": 1,
        "concurrency": 1,
        "max_action_tokens": 16,
        "thinking": False,
        "capacity_wait_seconds": 5,
        "training_config": {"learning_rate": 0.01, "lora_rank": 2, "lora_alpha": 4},
        "environment_eval": {"groups": args.eval_groups, "group_size": 1},
    }


class Serve:
    """``kiln-verify serve --model`` in its own process; its stderr goes to a file."""

    process: subprocess.Popen[str]

    def __init__(self, state: Path, model: Path, log: Path) -> None:
        self.log = log.open("wb")
        argv = [*cli(), "serve", "--port", "0", "--state-dir", str(state), "--model", str(model)]
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=REPO_ROOT
        )
        assert self.process.stdout is not None
        found = READY_LINE.search(self.process.stdout.readline())
        if found is None:
            self.stop()
            raise RuntimeError(f"kiln-verify serve did not start: {log.read_text()[-2000:]}")
        self.url = found.group(1)
        # anything it prints later is drained, so a full pipe never stalls the server
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()


def server_run(
    args: argparse.Namespace, bandit_url: str, model: Path, work: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(timings, the run's final status) of one train run on a fresh server."""
    work.mkdir(parents=True)
    start = time.perf_counter()
    serve = Serve(work / "state", model, work / "serve.log")
    startup = time.perf_counter() - start
    pid = serve.process.pid
    try:
        with httpx.Client(base_url=serve.url, trust_env=False, timeout=600) as http:
            samples = [(_now_ms(), _process_cpu(pid))]
            response = http.post("/v1/openenv/runs", json=request_body(args, bandit_url))
            samples.append((_now_ms(), _process_cpu(pid)))
            if response.status_code not in (200, 201, 202):
                raise RuntimeError(f"the train request was refused: {response.text[:2000]}")
            run_id = response.json()["run_id"]
            seen: dict[str, float] = {}
            deadline = time.monotonic() + args.timeout
            while True:
                status = http.get(f"/v1/openenv/runs/{run_id}").json()
                samples.append((_now_ms(), _process_cpu(pid)))
                seen.setdefault(status["state"], samples[-1][0])
                if status["state"] in TERMINAL:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the run is still {status['state']} after the timeout")
                time.sleep(args.poll)
            if status["state"] != "completed":
                raise RuntimeError(f"the run ended {status['state']}: {status.get('error')}")
            receipt = http.get(f"/v1/openenv/runs/{run_id}/artifacts/train_receipt").json()
    finally:
        serve.stop()
    trainer = receipt["trainer"]
    seen.setdefault("training_running", trainer["started_unix_ms"])
    seen["completed"] = min(status["finished_unix_ms"], samples[-1][0])
    bounds = [
        samples[0][0],
        samples[1][0],
        _entered(seen, "submitting"),
        _entered(seen, "training_queued"),
        trainer["finished_unix_ms"],
        _entered(seen, "environment_evaluating"),
        seen["completed"],
    ]
    cpu = [_cpu_at(samples, bound) for bound in bounds]
    timings = {
        "startup_s": round(startup, 3),
        "stages_s": _spans(bounds, 1000.0),
        "stages_cpu_s": _spans(cpu, 1.0),
        "trainer_child_s": round(trainer["duration_ms"] / 1000.0, 3),
        "cpu_s": round(samples[-1][1], 2),
    }
    return timings, status


def _spans(bounds: list[float], unit: float) -> dict[str, float]:
    return {
        name: round(max(0.0, end - begin) / unit, 3)
        for name, begin, end in zip(STAGES, bounds, bounds[1:], strict=False)
    }


def _cpu_at(samples: list[tuple[float, float]], when: float) -> float:
    """The server's CPU seconds at the first sample taken at or after ``when`` (the
    trainer's CPU counts once the server has reaped it, right at its finish)."""
    return next((cpu for at, cpu in samples if at >= when), samples[-1][1])


def _process_cpu(pid: int) -> float:
    """CPU seconds of a live process and its reaped children (the trainer), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _entered(seen: dict[str, float], state: str) -> float:
    """When the run was first seen in ``state`` or any later one (a short state can fall
    between two polls)."""
    return min(seen[later] for later in ORDER[ORDER.index(state) :] if later in seen)


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one hand-run step (a child process)."""
    start, cpu = time.perf_counter(), children_cpu()
    out = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed: {out.stderr[-3000:]}")
    return time.perf_counter() - start, children_cpu() - cpu


def select_rows(corpus: Path, output: Path) -> Path:
    """The GRPO rows whose rewards differ: the server's §5.7 selection, which no CLI step
    does (untimed; a zero-variance group has no advantage to learn from)."""
    kept = [
        line
        for line in corpus.read_bytes().splitlines(keepends=True)
        if len({c["reward"] for c in json.loads(line)["completions"]}) > 1
    ]
    output.write_bytes(b"".join(kept))
    return output


def trainer_options(status: dict[str, Any]) -> list[str]:
    """The options the run's sealed contract gave its trainer (on a CPU device)."""
    from kiln_verify.control.training.effective import runner_options
    from kiln_verify.control.training.records import OpenEnvTrainingContract

    contract = OpenEnvTrainingContract.model_validate(status["training_contract"])
    server = ["--dtype", "float32", "--no-gradient-checkpointing"]
    return [*server, *runner_options(contract.effective_config)]


def hand_run(
    args: argparse.Namespace, bandit_url: str, model: Path, status: dict[str, Any], work: Path
) -> dict[str, Any]:
    """Each step of the run as its own process; seconds per stage and the corpus size."""
    kv, work = cli(), work.resolve()
    lane = ["--environment", bandit_url, "--max-steps", "1", "--concurrency", "1",
            "--max-action-tokens", "16", "--no-thinking",
            "--capacity-wait-seconds", "5"]  # fmt: skip
    policy = ["--policy-option", f"model_dir={model}"]
    corpus = work / "train.grpo.jsonl"
    stages: dict[str, tuple[float, float] | None] = {"admission": None}
    stages["collection"] = _timed(
        [*kv, "openenv", "rollout", *lane, "--groups", str(args.groups),
         "--group-size", str(args.group_size), "--seed-start", "0",
         "--policy", "transformers", *policy, "--grpo-output", str(corpus),
         "--output", str(work / "openenv.rollouts.jsonl"),
         "--replay-output", str(work / "openenv.replay.json"),
         "--summary-output", str(work / "openenv.rollout-summary.json")]
    )  # fmt: skip
    selected = select_rows(corpus, work / "train.selected.jsonl")
    stages["export"] = _timed(
        [*kv, "hf", "export-grpo", "--model", str(model), "--file", str(selected),
         "--name", "train", "--output", str(work / "train.kiln-hf.tar.gz")]
    )  # fmt: skip
    bundle = work / "train.kiln-hf"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    stages["training"] = _timed(
        [sys.executable, "-I", str(bundle / "train.py"), str(bundle), "--base-model",
         str(model), *trainer_options(status)],
        env={**env, **OFFLINE, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    registry = work / "registry"
    verified = _timed([*kv, "hf", "verify", "--completed", str(bundle)])
    imported = _timed(
        [*kv, "hf", "import-peft", "--bundle", str(bundle), "--name", OUTPUT,
         "--model", str(model), "--registry", str(registry)]
    )  # fmt: skip
    stages["import"] = (verified[0] + imported[0], verified[1] + imported[1])
    stages["evaluation"] = _timed(
        [*kv, "openenv", "evaluate", *lane, "--groups", str(args.eval_groups),
         "--group-size", "1", "--seed-start", str(args.groups),
         "--baseline-policy", "transformers", "--baseline-policy-option", f"model_dir={model}",
         "--candidate-policy", "transformers", "--candidate-policy-option", f"model_dir={model}",
         "--candidate-policy-option", f"adapter_dir={registry / OUTPUT}",
         "--output-dir", str(work / "evaluation")]
    )  # fmt: skip
    return {
        "stages_s": {k: None if v is None else round(v[0], 3) for k, v in stages.items()},
        "stages_cpu_s": {k: None if v is None else round(v[1], 3) for k, v in stages.items()},
        "grpo_groups": len(selected.read_bytes().splitlines()),
    }
