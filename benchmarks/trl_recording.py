"""TRL recording overhead: ``GRPOTrainer`` with kiln-verify's factory and recorder versus the
same trainer with a minimal hand-written ``environment_factory`` over the same oracle.

One ``kiln-verify oracle serve counter --port 0`` subprocess serves every run. The tiny
tool-calling model (:mod:`kiln_verify.testing.tool_model`, warm-started on counter episodes)
is built once; each run loads it afresh and trains a LoRA adapter (r=2) for ``--steps``
optimizer steps of 2 groups x 2 completions with TRL's ``GRPOTrainer`` (CPU, float32, no KL,
seed 7), identical in every arm except for the environment:

* ``baseline``: a hand-written ``environment_factory`` as a TRL user writes it -- one
  synchronous ``websockets`` connection per instance, ``reset`` sends a seeded reset and
  returns the observation text, ``step(amount, metadata=None, note=None)`` sends one step,
  ``get_reward`` returns the summed rewards. Its tool schema is checked equal to the
  factory's (``factory.tool_schema()``) and it answers with the same texts (the collector's
  observation and error texts, the same 4-step horizon and -1 penalties), so with the same
  seed both arms sample the same sequences and, since the recorder reads the behaviour
  log-probabilities from TRL's own training forward, train the same adapter bit for bit
  (both are compared per repeat);
* ``kiln``: ``OpenEnvToolFactory`` + ``BatchRecorder`` (every step recorded: adapter saved,
  behaviour logprobs, one bundle published per step);
* ``kiln_everyN`` (``--every N``, 0 to skip): the same with ``BatchRecorder(every=N)``.

Only ``trainer.train()`` is timed (model load, trainer construction, the factory's
inspection and ``attach`` are not); one untimed warm-up run per arm comes first, then the
arms run in rotated order (A B C, B C A, ...) for ``--repeats``. Reported per arm: steps/s
and CPU time (this process plus the recorder's worker process; the oracle is another
process and not counted), tokens per step (sampled, i.e. ``tool_mask`` 1; completion incl.
tool results; prompt), the time spent inside the environment methods (``reset``, the tool,
``get_reward``) and, for the kiln arms, inside the recorder's phases on the training
thread: the adapter snapshot before generation (PEFT's model card a part of it, when PEFT
saves); capturing the batch (prompts, ids, rewards); the behaviour logprobs, i.e. the row
index and the copy out of TRL's forward; building and checking the bundle once the batch
is captured, with the wait for the environment's re-inspection as a part (the GRPO corpus
with its token replay, the re-inspection and the publication run in the recorder's worker
process: ``corpus_s`` and ``publish_s`` stay 0 unless they run in-process); the wait for
the worker's corpus before the optimizer step; and handing the files over at step end.
Then the median ratios kiln / baseline of wall time (paired per repeat; raw, and per
sampled token), of CPU time, and the bytes each recorded step wrote (OpenEnv files,
corpus, adapter). Target: at most 1.1x. torch runs on ``--threads`` threads (default 1:
on a shared 2-core machine two intra-op threads plus the oracle and other jobs
oversubscribe the cores, and a run's time then swings by an order of magnitude).

    python -m benchmarks.trl_recording --steps 8 --repeats 9 --every 2 --threads 1 [--json]
    python -m benchmarks.trl_recording --quick --json   # smoke shape: 2 steps, 1 repeat
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import start_oracle_process  # noqa: E402

TARGET_RATIO = 1.1
SERVER = "counter"
GROUP_SIZE = 2
BATCH = 4
MAX_EPISODE_STEPS = 4
PENALTY = -1.0
MAX_RECOVERABLE = 3
SEED = 7
OPENENV_FILES = ("openenv.rollouts.jsonl", "openenv.replay.json", "openenv.rollout-summary.json")
CORPUS_FILE = "grpo.train.jsonl"
ADAPTER_DIR = "adapter"

_HEAD = "OpenEnv {label} (observation, reward, done, and optional metadata JSON):\n"
_ENDED = '{"openenv_episode_over":true,"done":true}'


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- the baseline: a hand-written environment_factory --------------------------------------


class CounterEnv:
    """One counter episode per ``reset`` over a plain synchronous WebSocket (the baseline).

    The texts and the episode rules are the collector's (so both arms show the model the
    same strings): labelled compact JSON observations, ``{"openenv_error": ...}`` for a
    protocol error, at most 4 actions, -1 per protocol error and for a rollout that stopped
    calling the tool while the episode was open.
    """

    def __init__(self, factory: HandWrittenFactory) -> None:
        self._factory = factory
        self._stack = contextlib.ExitStack()
        self._ws: Any = None
        self._total = 0.0
        self._steps = 0
        self._errors = 0
        self._over = True

    def _exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        self._ws.send(_compact(message))
        reply: dict[str, Any] = json.loads(self._ws.recv())
        return reply

    def _observation(self, label: str, data: dict[str, Any]) -> str:
        body = {
            "observation": dict(sorted(data["observation"].items())),
            "reward": data.get("reward"),
            "done": data["done"],
        }
        return _HEAD.format(label=label) + _compact(body)

    def reset(self, **kwargs: Any) -> str:
        started = time.perf_counter()
        from websockets.sync.client import connect

        if self._ws is None:
            self._ws = self._stack.enter_context(connect(self._factory.ws_url, compression=None))
        reply = self._exchange({"type": "reset", "data": {"seed": self._factory.next_seed()}})
        if reply.get("type") != "observation":
            raise RuntimeError(f"reset answered {reply!r}")
        self._total, self._steps, self._errors, self._over = 0.0, 0, 0, False
        text = self._observation("reset result", reply["data"])
        self._factory.environment_s += time.perf_counter() - started
        return text

    def step(self, amount: int, metadata: dict | None = None, note: str | None = None) -> str:  # type: ignore[type-arg]
        """Adds each step's amount to a running total; reward is the total as a float; done once the total reaches 4 or after 16 steps.

        Args:
            amount: Added to the running total.
            metadata: Additional metadata for the action
            note: Free text, echoed back as last_note.

        Returns:
            The environment's answer to the action.
        """  # noqa: E501
        started = time.perf_counter()
        try:
            if self._over:
                return _ENDED
            action: dict[str, Any] = {"amount": amount}
            if metadata is not None:
                action["metadata"] = metadata
            if note is not None:
                action["note"] = note
            reply = self._exchange({"type": "step", "data": action})
            self._steps += 1
            data = reply["data"]
            if reply.get("type") == "observation":
                reward = data.get("reward")
                self._total += float(reward) if reward is not None else 0.0
                text = self._observation("step result", data)
                self._over = bool(data["done"])
            else:
                self._total += PENALTY
                self._errors += 1
                continued = self._errors <= MAX_RECOVERABLE
                error = {"code": data["code"], "message": data["message"]}
                text = _compact({"openenv_error": error, "recoverable": continued,
                                 "done": not continued})  # fmt: skip
                self._over = not continued
            if self._steps >= MAX_EPISODE_STEPS:
                self._over = True
            return text
        finally:
            self._factory.environment_s += time.perf_counter() - started

    def get_reward(self) -> float:
        if not self._over:  # the model stopped calling the tool: a reply without an action
            self._total += PENALTY
            self._over = True
        return self._total

    def _close(self) -> None:  # private: TRL makes every public method a tool
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.send('{"type":"close"}')
        self._stack.close()


class HandWrittenFactory:
    """``environment_factory=HandWrittenFactory(url)``: TRL calls it for each instance."""

    def __init__(self, base_url: str) -> None:
        self.ws_url = base_url.replace("http://", "ws://", 1) + "/ws"
        self.instances: list[CounterEnv] = []
        self.resets = 0
        self.environment_s = 0.0

    def __call__(self) -> CounterEnv:
        instance = CounterEnv(self)
        self.instances.append(instance)
        return instance

    def next_seed(self) -> int:
        seed = self.resets // GROUP_SIZE  # the factory's seed rule: one seed per group
        self.resets += 1
        return seed

    def close(self) -> None:
        for instance in self.instances:
            instance._close()


# -- timing hooks ------------------------------------------------------------------------


@dataclasses.dataclass
class Phases:
    """Seconds spent in each instrumented phase during one run. ``model_card_s`` is part of
    ``snapshot_s``; ``revalidate_s`` (the wait for the re-inspection started after
    scoring) and ``corpus_s`` are parts of ``bundle_s`` (building and checking every file,
    inside the loss of the batch's last micro-batch); ``capture_s`` copies what TRL
    generated and scored; ``corpus_wait_s`` waits for the worker's corpus before the
    optimizer step; ``step_end_s`` hands the files to the publisher, and ``publish_s`` is
    the publication itself when it runs in this process (``worker=False``: on a background
    thread, overlapping the next step)."""

    environment_s: float = 0.0
    snapshot_s: float = 0.0
    model_card_s: float = 0.0
    logprobs_s: float = 0.0
    bundle_s: float = 0.0
    revalidate_s: float = 0.0
    corpus_s: float = 0.0
    capture_s: float = 0.0
    corpus_wait_s: float = 0.0
    step_end_s: float = 0.0
    publish_s: float = 0.0


PHASES = tuple(field.name for field in dataclasses.fields(Phases))


def _timed(phases: Phases, field: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            setattr(phases, field, getattr(phases, field) + time.perf_counter() - started)

    return wrapper


@contextlib.contextmanager
def _instrumented(phases: Phases) -> Iterator[None]:
    """Time the kiln arm's environment methods and recorder phases: these attributes are
    replaced by timing wrappers for the run and restored after (one that no longer exists
    is skipped, its phase stays 0)."""
    from peft import PeftModel

    from kiln_verify.core import publish
    from kiln_verify.trl import batch, episode, factory, recorder, snapshot

    targets: list[tuple[Any, str, str]] = [
        (episode.Episode, "start", "environment_s"),
        (episode.Episode, "act", "environment_s"),
        (factory.OpenEnvEnvironment, "get_reward", "environment_s"),  # ends and finishes
        (snapshot.AdapterReader, "snapshot", "snapshot_s"),
        (PeftModel, "create_or_update_model_card", "model_card_s"),
        (batch.CapturedBatch, "scored", "logprobs_s"),
        (batch.CapturedBatch, "trained", "logprobs_s"),
        (recorder.BatchRecorder, "_build", "bundle_s"),
        (batch, "_revalidate", "revalidate_s"),
        (batch, "grpo_rows", "corpus_s"),
        (batch.CapturedBatch, "generated", "capture_s"),
        (batch.CapturedBatch, "rewarded", "capture_s"),
        (recorder.BatchRecorder, "_collect_corpus", "corpus_wait_s"),
        (recorder.BatchRecorder, "_step_end", "step_end_s"),
        (publish, "publish_directory", "publish_s"),  # imported by _step_end when called
    ]
    found = [(owner, name, field) for owner, name, field in targets if name in vars(owner)]
    saved = [(owner, name, vars(owner)[name]) for owner, name, _ in found]
    try:
        for owner, name, field in found:
            setattr(owner, name, _timed(phases, field, vars(owner)[name]))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


# -- one run -------------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    arm: str
    wall_s: float
    cpu_s: float
    steps: int
    sampled_tokens: int
    completion_tokens: int
    prompt_tokens: int
    tool_calls: int
    sequences_sha256: str
    adapter_sha256: str
    phases: Phases
    bundles: list[dict[str, int]]


def grpo_config(output_dir: Path, steps: int, max_completion_length: int) -> Any:
    from trl import GRPOConfig  # type: ignore[attr-defined]

    return GRPOConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=BATCH,
        num_generations=GROUP_SIZE,
        max_completion_length=max_completion_length,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=SEED,
        use_cpu=True,
        bf16=False,
        beta=0.0,
        max_tool_calling_iterations=MAX_EPISODE_STEPS,
        disable_tqdm=True,
    )


def _bundle_bytes(bundle: Path) -> dict[str, int]:
    sizes = {"openenv": 0, "corpus": 0, "adapter": 0}
    for path in bundle.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(bundle)
        if relative.parts[0] == ADAPTER_DIR:
            sizes["adapter"] += path.stat().st_size
        elif relative.name == CORPUS_FILE:
            sizes["corpus"] += path.stat().st_size
        elif relative.name in OPENENV_FILES:
            sizes["openenv"] += path.stat().st_size
        else:
            raise RuntimeError(f"unexpected bundle file {relative}")
    sizes["total"] = sum(sizes.values())
    return sizes


def run_arm(
    arm: str, every: int, url: str, model_dir: Path, args: argparse.Namespace, scratch: Path
) -> Run:
    from datasets import Dataset  # type: ignore[import-untyped]
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer  # type: ignore[attr-defined]

    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.trl import BatchRecorder, OpenEnvToolFactory

    steps = args.steps
    out = Path(tempfile.mkdtemp(prefix=f"{arm}-", dir=scratch))
    phases = Phases()
    factory: Any
    if arm == "baseline":
        factory = HandWrittenFactory(url)
    else:
        options = CollectionOptions(
            group_size=GROUP_SIZE, thinking=False, max_steps=MAX_EPISODE_STEPS
        )
        factory = OpenEnvToolFactory(url, options=options)
    counts = {"sampled": 0, "completion": 0, "prompt": 0, "tool_calls": 0}
    digest = hashlib.sha256()
    try:
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model_dir),
            args=grpo_config(out / "trainer", steps, args.max_completion_length),
            train_dataset=Dataset.from_list(
                [{"prompt": [{"role": "user", "content": ""}]}] * (BATCH * steps)
            ),
            processing_class=AutoTokenizer.from_pretrained(model_dir),
            peft_config=LoraConfig(
                r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
            ),
            environment_factory=factory,
        )
        generate = trainer._generate

        def counted(prompts: Any) -> Any:
            output = generate(prompts)
            prompt_ids, completion_ids, tool_mask, completions = output[:4]
            counts["prompt"] += sum(len(ids) for ids in prompt_ids)
            counts["completion"] += sum(len(ids) for ids in completion_ids)
            masks = tool_mask if tool_mask is not None else [[1] * len(c) for c in completion_ids]
            counts["sampled"] += sum(int(sum(mask)) for mask in masks)
            counts["tool_calls"] += sum(
                1 for turns in completions if isinstance(turns, list)
                for turn in turns if turn.get("role") == "tool"
            )  # fmt: skip
            for ids in completion_ids:
                digest.update(json.dumps([int(t) for t in ids]).encode())
            return output

        trainer._generate = counted  # type: ignore[method-assign]
        recorder = None
        if arm != "baseline":
            recorder = BatchRecorder(
                out / "bundles", model_dir=model_dir, factory=factory, every=every
            )
            recorder.attach(trainer)
        gc.collect()
        hooks = _instrumented(phases) if arm != "baseline" else contextlib.nullcontext()
        # the Trainer prints its logs to stdout, which carries the JSON report
        with hooks, contextlib.redirect_stdout(sys.stderr):
            worker_started = _worker_cpu_s()
            cpu_started, started = time.process_time(), time.perf_counter()
            trainer.train()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            cpu += _worker_cpu_s() - worker_started
        adapter = _adapter_digest(trainer.model)
        if arm == "baseline":
            phases.environment_s = factory.environment_s
        bundles = [_bundle_bytes(path) for path in recorder.published] if recorder else []
    finally:
        factory.close()
    shutil.rmtree(out, ignore_errors=True)
    expected = steps // every if arm != "baseline" else 0
    if len(bundles) != expected:
        raise RuntimeError(f"{arm}: {len(bundles)} bundles published, expected {expected}")
    return Run(
        arm, wall, cpu, steps, counts["sampled"], counts["completion"], counts["prompt"],
        counts["tool_calls"], digest.hexdigest(), adapter, phases, bundles,
    )  # fmt: skip


def _worker_cpu_s() -> float:
    """CPU seconds the recorder's corpus worker process has used so far (Linux ``/proc``;
    0 before it started): counted in a run's CPU time, since it does the recorder's work."""
    from kiln_verify.trl.worker import RecordingWorker

    process = RecordingWorker.process()
    if process is None:
        return 0.0
    try:
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _adapter_digest(model: Any) -> str:
    """The trained LoRA weights' exact bytes: equal in both arms when the recorder left
    TRL's update unchanged."""
    from peft import get_peft_model_state_dict

    digest = hashlib.sha256()
    for name, tensor in sorted(get_peft_model_state_dict(model).items()):
        digest.update(name.encode() + b"\0" + tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# -- the measurement -----------------------------------------------------------------------


def check_tool_schema(url: str) -> dict[str, Any]:
    """The baseline's tool schema must be the factory's, else the prompts differ."""
    from transformers.utils.chat_template_utils import get_json_schema

    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.trl import OpenEnvToolFactory

    factory = OpenEnvToolFactory(
        url, options=CollectionOptions(group_size=GROUP_SIZE, thinking=False)
    )
    try:
        schema = factory.tool_schema()
    finally:
        factory.close()
    baseline: dict[str, Any] = get_json_schema(CounterEnv(HandWrittenFactory(url)).step)
    if baseline != schema:
        raise RuntimeError(f"tool schemas differ:\n{baseline}\n{schema}")
    return schema


def build_model(directory: Path, tools: list[dict[str, Any]], warm_steps: int) -> Path:
    from kiln_verify.testing.tool_model import build_tool_model, warm_start_tool_model

    model_dir = build_tool_model(directory, tools)
    if warm_steps:
        warm_start_tool_model(model_dir, tools, steps=warm_steps)
    return model_dir


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def _arm_summary(runs: list[Run]) -> dict[str, Any]:
    steps = runs[0].steps

    def per_step(field: str) -> float:
        return round(_median([getattr(r, field) / steps for r in runs]), 1)

    summary: dict[str, Any] = {
        "wall_s": [round(r.wall_s, 3) for r in runs],
        "cpu_s": [round(r.cpu_s, 3) for r in runs],
        "median_wall_s": round(_median([r.wall_s for r in runs]), 3),
        "median_cpu_s": round(_median([r.cpu_s for r in runs]), 3),
        "steps_per_s": round(steps / _median([r.wall_s for r in runs]), 4),
        "ms_per_sampled_token": round(
            1e3 * _median([r.wall_s / max(r.sampled_tokens, 1) for r in runs]), 3
        ),
        "sampled_tokens_per_step": per_step("sampled_tokens"),
        "completion_tokens_per_step": per_step("completion_tokens"),
        "prompt_tokens_per_step": per_step("prompt_tokens"),
        "tool_calls_per_step": per_step("tool_calls"),
        "sampled_tokens": [r.sampled_tokens for r in runs],
        "phases_s_per_step": {
            name: round(_median([getattr(r.phases, name) / steps for r in runs]), 4)
            for name in PHASES
        },
    }
    bundles = [b for r in runs for b in r.bundles]
    if bundles:
        summary["recorded_steps_per_run"] = len(runs[0].bundles)
        summary["bytes_per_recorded_step"] = {
            part: int(_median([float(b[part]) for b in bundles]))
            for part in ("openenv", "corpus", "adapter", "total")
        }
        summary["bytes_per_recorded_step_min_max"] = [
            min(b["total"] for b in bundles),
            max(b["total"] for b in bundles),
        ]
    return summary


def _ratios(arm: list[Run], base: list[Run]) -> dict[str, Any]:
    """Paired per repeat (same rotation), then the median and the spread."""
    wall = [a.wall_s / b.wall_s for a, b in zip(arm, base, strict=True)]
    cpu = [a.cpu_s / b.cpu_s for a, b in zip(arm, base, strict=True)]
    per_token = [
        (a.wall_s / max(a.sampled_tokens, 1)) / (b.wall_s / max(b.sampled_tokens, 1))
        for a, b in zip(arm, base, strict=True)
    ]
    return {
        "ratio": round(_median(wall), 3),
        "ratio_min_max": [round(min(wall), 3), round(max(wall), 3)],
        "ratio_of_medians": round(
            _median([r.wall_s for r in arm]) / _median([r.wall_s for r in base]), 3
        ),
        "per_token_ratio": round(_median(per_token), 3),
        "cpu_ratio": round(_median(cpu), 3),
        "cpu_ratio_min_max": [round(min(cpu), 3), round(max(cpu), 3)],
        "wall_ratios": [round(v, 3) for v in wall],
        "same_sequences_as_baseline": sum(
            a.sequences_sha256 == b.sequences_sha256 for a, b in zip(arm, base, strict=True)
        ),
        "same_trained_adapter_as_baseline": sum(
            a.adapter_sha256 == b.adapter_sha256 for a, b in zip(arm, base, strict=True)
        ),
        "target_ratio": TARGET_RATIO,
        "met": _median(wall) <= TARGET_RATIO,
    }


def measure(args: argparse.Namespace, url: str, scratch: Path) -> dict[str, Any]:
    import torch

    schema = check_tool_schema(url)
    started = time.perf_counter()
    model_dir = build_model(scratch / "model", [schema], args.warm_start_steps)
    build_s = time.perf_counter() - started
    arms = ["baseline", "kiln"] + ([f"kiln_every{args.every}"] if args.every else [])
    every = {"baseline": 1, "kiln": 1, f"kiln_every{args.every}": args.every or 1}
    if args.warmup:
        warm = argparse.Namespace(**{**vars(args), "steps": min(args.steps, 2)})
        for arm in arms:
            run_arm(arm, every[arm], url, model_dir, warm, scratch)
    runs: dict[str, list[Run]] = {arm: [] for arm in arms}
    for repeat in range(args.repeats):
        shift = repeat % len(arms)
        for arm in arms[shift:] + arms[:shift]:
            runs[arm].append(run_arm(arm, every[arm], url, model_dir, args, scratch))
    result: dict[str, Any] = {
        "benchmark": "trl_recording",
        "server": f"kiln-verify oracle serve {SERVER} (subprocess)",
        "shape": {
            "optimizer_steps": args.steps,
            "completions_per_step": BATCH,
            "group_size": GROUP_SIZE,
            "max_episode_steps": MAX_EPISODE_STEPS,
            "max_completion_length": args.max_completion_length,
            "lora_r": 2,
            "warm_start_steps": args.warm_start_steps,
        },
        "repeats": args.repeats,
        "warmup": args.warmup,
        "every": args.every,
        "model_build_s": round(build_s, 2),
        "arms": {arm: _arm_summary(runs[arm]) for arm in arms},
        "ratios": {arm: _ratios(runs[arm], runs["baseline"]) for arm in arms[1:]},
        "torch_threads": torch.get_num_threads(),
        "threads_option": args.threads,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run")
    parser.add_argument("--repeats", type=int, default=9, help="interleaved runs per arm")
    parser.add_argument("--every", type=int, default=2, help="third arm: record every N (0: off)")
    parser.add_argument("--warm-start-steps", type=int, default=200)
    parser.add_argument("--max-completion-length", type=int, default=160)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke shape: 2 steps, every 2, 1 repeat, no warm-up, untrained model, 24 tokens",
    )
    parser.add_argument("--tmpdir", type=Path, default=None, help="where the scratch dir goes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.repeats, args.warmup, args.every = 2, 1, False, 2
        args.warm_start_steps, args.max_completion_length = 0, 24
    if (
        min(args.steps, args.repeats, args.max_completion_length) < 1
        or min(args.every, args.warm_start_steps, args.threads) < 0
    ):
        parser.error("--steps, --repeats and --max-completion-length must be >= 1, the rest >= 0")
    if args.every and args.steps % args.every:
        parser.error("--steps must be a multiple of --every")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    server = start_oracle_process(SERVER)
    try:
        with tempfile.TemporaryDirectory(prefix="trl-recording-", dir=args.tmpdir) as tmp:
            result = measure(args, server.base_url, Path(tmp))
    finally:
        server.stop()
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        base = result["arms"]["baseline"]
        lines = [f"baseline {base['steps_per_s']} steps/s ({base['median_wall_s']} s per run)"]
        for arm, ratio in result["ratios"].items():
            summary = result["arms"][arm]
            lines.append(
                f"{arm} {summary['steps_per_s']} steps/s, ratio {ratio['ratio']}x "
                f"(min {ratio['ratio_min_max'][0]}, max {ratio['ratio_min_max'][1]}; "
                f"per token {ratio['per_token_ratio']}x, CPU {ratio['cpu_ratio']}x; "
                f"target <= {TARGET_RATIO}x), "
                f"{summary['bytes_per_recorded_step']['total']} bytes per recorded step"
            )
        sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
