"""TRL's real GRPOTrainer on live oracle servers, through kiln_verify.trl, every step recorded.

One run of the factory path (two optimizer steps, 2 groups x 2 completions, the tiny
tool-calling model, a counter whose odd seeds refuse the first step) feeds most checks:
each step's bundle passes ``openenv verify``; its corpus passes the export's token replay
(``hf export-grpo`` runs the ``hf verify`` scan) and ``hf verify``; ``openenv replay``
replays step 1 against the live server without drift; every batch holds a multi-turn
episode and some episodes a recoverable protocol error; and step 1's corpus fed to the
export's own ``train.py`` (recorded GRPO) reproduces the live update. Then: an environment
that dies mid-batch fails the step with nothing published, and the ``rollout_func`` path
serves a single-session server one episode at a time with capacity waits.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import TrlEpisodeFailed
from kiln_verify.openenv.collect.controls import CollectionOptions
from pytest_kiln.fixtures import OracleFactory

from .conftest import FlakyCounter, grpo_args, lora, prompts

pytestmark = pytest.mark.slow
pytest.importorskip("trl")
pytest.importorskip("peft")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def _trainer(model_dir: Path, out: Path, **kwargs: Any) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer  # type: ignore[attr-defined]

    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=grpo_args(out / "trainer"),
        train_dataset=prompts(8),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        peft_config=lora(),
        **kwargs,
    )


class FactoryRun:
    def __init__(
        self,
        bundles: list[Path],
        url: str,
        live_step_1: Path,
        model: Path,
        forwards: int,
        jobs: list[Any],
    ) -> None:
        self.bundles, self.url, self.live_step_1, self.model = bundles, url, live_step_1, model
        self.forwards, self.jobs = forwards, jobs


@pytest.fixture(scope="module")
def factory_run(tool_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import TrainerCallback

    from kiln_verify.trl import BatchRecorder, OpenEnvToolFactory
    from kiln_verify.trl import recorder as recorder_module
    from pytest_kiln.fixtures import _start

    jobs: list[Any] = []  # each step's corpus job, as the recorder sent it to its worker
    names = vars(recorder_module)
    building = names["bundle_files"]

    def capture(*args: Any, **kwargs: Any) -> Any:
        files, corpus = building(*args, **kwargs)
        jobs.append(corpus)
        return files, corpus

    names["bundle_files"] = capture
    out = tmp_path_factory.mktemp("factory")
    server = _start("counter", 8, (), environment=FlakyCounter)
    factory = OpenEnvToolFactory(
        server.base_url,
        options=CollectionOptions(group_size=2, thinking=False, max_steps=4),
    )
    try:
        trainer = _trainer(tool_model, out, environment_factory=factory)
        recorder = BatchRecorder(out / "bundles", model_dir=tool_model, factory=factory)
        recorder.attach(trainer)
        forwards = 0
        scoring = trainer._get_per_token_logps_and_entropies

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal forwards
            forwards += 1
            return scoring(*args, **kwargs)

        trainer._get_per_token_logps_and_entropies = counted
        live = out / "live-step-1"

        class SaveStepOne(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if state.global_step == 1:
                    trainer.model.save_pretrained(live)

        trainer.add_callback(SaveStepOne())
        trainer.train()
        yield FactoryRun(recorder.published, server.base_url, live, tool_model, forwards, jobs)
    finally:
        names["bundle_files"] = building
        factory.close()
        server.stop()


def _summary(bundle: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((bundle / "openenv.rollout-summary.json").read_text())
    return loaded


def test_every_step_publishes_a_bundle_openenv_verify_accepts(factory_run: FactoryRun) -> None:
    from kiln_verify.openenv.verify import verify_bundle

    names = [(b.parent.name, b.name) for b in factory_run.bundles]
    assert names == [("rank-00000", "step-000001"), ("rank-00000", "step-000002")]
    seeds = []
    for bundle in factory_run.bundles:
        assert sorted(p.name for p in bundle.iterdir()) == [
            "adapter",
            "grpo.train.jsonl",
            "openenv.replay.json",
            "openenv.rollout-summary.json",
            "openenv.rollouts.jsonl",
        ]
        report = verify_bundle(bundle / "openenv.rollout-summary.json")
        assert (report.groups, report.rollouts) == (2, 4)
        seeds.append(_summary(bundle)["seed_start"])
    assert seeds == [0, 2]  # the seed rule: groups count on across steps


def test_each_batch_has_a_multi_turn_episode_and_some_a_recoverable_error(
    factory_run: FactoryRun,
) -> None:
    errors = 0
    for bundle in factory_run.bundles:
        replay = json.loads((bundle / "openenv.replay.json").read_text())
        candidates = [c for g in replay["groups"] for c in g["candidates"]]
        assert max(len(c["exchanges"]) for c in candidates) >= 2
        errors += sum(c["recoverable_protocol_errors"] for c in candidates)
        rows = [json.loads(line) for line in (bundle / "grpo.train.jsonl").read_text().splitlines()]
        actions = [
            sum(s["kind"] == "action" for s in c["trajectory"])
            for row in rows
            for c in row["completions"]
        ]
        assert max(actions) >= 2
    assert errors >= 1


def test_each_corpus_exports_and_verifies_with_token_replay(
    factory_run: FactoryRun, tmp_path: Path
) -> None:
    from kiln_verify.hf.export import export_grpo
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.verify import verify_hf_path

    for index, bundle in enumerate(factory_run.bundles, start=1):
        outcome = export_grpo(
            ExportSource(model=factory_run.model, input_adapter=bundle / "adapter"),
            dataset=bundle / "grpo.train.jsonl",
            name=f"step{index}",
            output=tmp_path / f"step{index}.kiln-hf.tar.gz",
        )
        assert verify_hf_path(outcome.directory).rows == 2


def test_openenv_replay_replays_a_step_against_the_live_environment(
    factory_run: FactoryRun,
) -> None:
    from typer.testing import CliRunner

    from kiln_verify.cli import app

    summary = factory_run.bundles[0] / "openenv.rollout-summary.json"
    result = CliRunner().invoke(app, ["openenv", "replay", "--summary", str(summary), "--json"])
    assert result.exit_code == 0, result.output[-2000:]
    run = json.loads(result.stdout)["report"]  # exit 0: no drift (drift exits 1, replay_drift)
    assert run["schema"] == "kiln.openenv-replay-run.v1"
    assert (run["groups"], run["rollouts"]) == (2, 4)
    assert run["environment_exchanges"] >= 2


def test_train_py_reproduces_the_update_of_step_one(
    factory_run: FactoryRun, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    from kiln_verify.hf.export import export_grpo
    from kiln_verify.hf.export.source import ExportSource
    from tests.hf_roundtrip.conftest import run_train

    bundle = factory_run.bundles[0]
    outcome = export_grpo(
        ExportSource(model=factory_run.model, input_adapter=bundle / "adapter"),
        dataset=bundle / "grpo.train.jsonl",
        name="replayed",
        output=tmp_path / "replayed.kiln-hf.tar.gz",
    )
    run_train(
        outcome.directory,
        factory_run.model,
        "--batch-size",
        "2",
        "--beta",
        "0",
        "--learning-rate",
        "1e-3",
        "--lr-scheduler",
        "constant",
        "--scale-rewards",
        "group",
    )
    before = load_file(str(bundle / "adapter" / "adapter_model.safetensors"))
    replayed = load_file(str(outcome.directory / "adapter_model.safetensors"))
    live = load_file(str(factory_run.live_step_1 / "adapter_model.safetensors"))
    assert sorted(replayed) == sorted(live) == sorted(before)
    moved = max(float((live[k] - before[k]).abs().max()) for k in live)
    differ = max(float((live[k] - replayed[k]).abs().max()) for k in live)
    assert moved > 0
    print(f"update max |delta| {moved:.3e}, live vs train.py max |diff| {differ:.3e}")
    assert differ <= 1e-3 * moved, (moved, differ)
    assert all(torch.isfinite(t).all() for t in replayed.values())


def test_the_recorder_leaves_trl_s_update_unchanged(
    factory_run: FactoryRun, tmp_path: Path
) -> None:
    """The behaviour log-probabilities are read from TRL's own training forward
    (kiln_verify.trl.logprobs): the recorder adds no forward (one per optimizer step, TRL's
    loss on its one micro-batch), and step 1 without a recorder, same seed and environment,
    gives the same adapter bit for bit."""
    import torch
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from kiln_verify.trl import OpenEnvToolFactory

    assert factory_run.forwards == len(factory_run.bundles) == 2
    factory = OpenEnvToolFactory(
        factory_run.url, options=CollectionOptions(group_size=2, thinking=False, max_steps=4)
    )
    try:
        trainer = _trainer(factory_run.model, tmp_path, environment_factory=factory)
        plain = tmp_path / "plain-step-1"

        class SaveStepOne(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if state.global_step == 1:
                    trainer.model.save_pretrained(plain)
                    control.should_training_stop = True

        trainer.add_callback(SaveStepOne())
        trainer.train()
    finally:
        factory.close()
    unrecorded = load_file(str(plain / "adapter_model.safetensors"))
    recorded = load_file(str(factory_run.live_step_1 / "adapter_model.safetensors"))
    assert sorted(unrecorded) == sorted(recorded)
    assert all(torch.equal(unrecorded[k], recorded[k]) for k in recorded)


def test_the_recording_worker_builds_and_refuses_exactly_as_the_process_would(
    factory_run: FactoryRun,
) -> None:
    """Step 1's corpus job, as the recorder sent it: the worker's bytes are the published
    corpus and the in-process build's; a tampered prompt is refused with the same error on
    both sides; a worker killed with a job in flight fails that job, and the next job
    starts another worker."""
    import dataclasses
    import signal

    from kiln_verify.errors import TrlRecordingFailed
    from kiln_verify.trl.corpus import grpo_rows
    from kiln_verify.trl.identity import BaseModel
    from kiln_verify.trl.worker import RecordingWorker

    base = BaseModel(factory_run.model)
    worker = RecordingWorker(base.rerender_sources())
    job = factory_run.jobs[0]
    here = grpo_rows(job.completions, rerender=base.rerender(), **job.options)
    there = worker.corpus(job.completions, job.options).result()
    assert there == here == (factory_run.bundles[0] / "grpo.train.jsonl").read_bytes()

    first = job.completions[0]
    tampered = dataclasses.replace(
        first, prompt_ids=[first.prompt_ids[0] + 1, *first.prompt_ids[1:]]
    )
    bad = [tampered, *job.completions[1:]]
    with pytest.raises(TrlRecordingFailed) as in_process:
        grpo_rows(bad, rerender=base.rerender(), **job.options)
    with pytest.raises(TrlRecordingFailed) as in_worker:
        worker.corpus(bad, job.options).result()
    assert str(in_worker.value) == str(in_process.value)
    assert "hf_grpo_prompt_replay_mismatch" in str(in_worker.value)

    process = RecordingWorker.process()
    assert process is not None
    process.send_signal(signal.SIGSTOP)  # the job below is in flight, never answered
    in_flight = worker.corpus(job.completions, job.options)
    process.kill()
    process.wait(10)
    with pytest.raises(TrlRecordingFailed, match="the recording worker process exited"):
        in_flight.result()
    assert worker.corpus(job.completions, job.options).result() == here
    assert RecordingWorker.process() not in (None, process)


@contextlib.contextmanager
def _recorded(tool_model: Path, out: Path, url: str) -> Iterator[tuple[Any, Any]]:
    """A trainer on ``url`` through the factory, every step recorded under ``out``."""
    from kiln_verify.trl import BatchRecorder, OpenEnvToolFactory

    factory = OpenEnvToolFactory(
        url, options=CollectionOptions(group_size=2, thinking=False, max_steps=4)
    )
    try:
        trainer = _trainer(tool_model, out, environment_factory=factory)
        recorder = BatchRecorder(out / "bundles", model_dir=tool_model, factory=factory)
        recorder.attach(trainer)
        yield trainer, recorder
    finally:
        factory.close()


def _nothing_published(recorder: Any, out: Path) -> None:
    assert recorder.wait() == []
    assert not (out / "bundles").exists() or not any((out / "bundles").rglob("*"))


def test_an_environment_killed_mid_batch_fails_the_step_and_publishes_nothing(
    tool_model: Path, tmp_path: Path, start: OracleFactory
) -> None:
    server = start("counter", max_sessions=8, faults=["drop-after-steps=0"])
    with _recorded(tool_model, tmp_path, server.base_url) as (trainer, recorder):
        with pytest.raises(TrlEpisodeFailed) as raised:
            trainer.train()
        assert raised.value.code == "trl_episode_failed"
    _nothing_published(recorder, tmp_path)


def test_a_batch_that_cannot_be_recorded_fails_before_the_weights_change(
    tool_model: Path, tmp_path: Path, start: OracleFactory
) -> None:
    """The environment changes identity with the batch's first reset: the bundle is
    built inside the loss of the batch's last micro-batch, so the refusal comes before
    its backward pass and the optimizer step, and the adapter keeps its initial weights."""
    import torch
    from peft import get_peft_model_state_dict

    from kiln_verify.errors import EnvironmentIdentityChanged

    server = start("counter", max_sessions=8, faults=["identity-drift=0"])
    with _recorded(tool_model, tmp_path, server.base_url) as (trainer, recorder):
        before = {k: v.clone() for k, v in get_peft_model_state_dict(trainer.model).items()}
        with pytest.raises(EnvironmentIdentityChanged) as raised:
            trainer.train()
        assert raised.value.code == "environment_identity_changed"
        after = get_peft_model_state_dict(trainer.model)
        assert trainer.state.global_step == 0
        assert all(torch.equal(before[k], after[k]) for k in before)
    _nothing_published(recorder, tmp_path)


def test_rollout_func_serves_a_single_session_server_with_capacity_waits(
    tool_model: Path, tmp_path: Path, start: OracleFactory
) -> None:
    from kiln_verify.openenv.protocol.client import OpenEnvClient
    from kiln_verify.openenv.verify import verify_bundle
    from kiln_verify.trl import BatchRecorder, OpenEnvRolloutFunc
    from kiln_verify.trl.loop import BackgroundLoop

    server = start("counter", max_sessions=1)
    options = CollectionOptions(
        group_size=2, thinking=False, max_steps=2, concurrency=1, max_action_tokens=24
    )
    rollout = OpenEnvRolloutFunc(server.base_url, model_dir=str(tool_model), options=options)
    # another client holds the only slot until the first episode has been refused it once
    # (not for a fixed time: on a loaded machine the trainer can take longer than that to
    # ask, and then never waits), so the first episode must wait for it
    loop = BackgroundLoop()
    holder = OpenEnvClient(server.base_url)
    held = loop.run(holder.open_session_with_capacity(5))

    def release_after_a_refusal() -> None:
        deadline = time.monotonic() + 120
        while server.app.ctx.session_attempts < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        loop.run(held.session.close())

    release = threading.Thread(target=release_after_a_refusal, daemon=True)
    try:
        trainer = _trainer(
            tool_model, tmp_path, rollout_func=rollout, reward_funcs=[rollout.reward]
        )
        recorder = BatchRecorder(tmp_path / "bundles", model_dir=tool_model, rollout=rollout)
        recorder.attach(trainer)
        release.start()
        trainer.train()
    finally:
        if release.ident is not None:
            release.join()
        rollout.close()
        loop.run(holder.aclose())
        loop.close()
    assert len(recorder.published) == 2
    retries = 0
    for bundle in recorder.published:
        assert verify_bundle(bundle / "openenv.rollout-summary.json").rollouts == 4
        retries += sum(r["capacity_retries"] for r in _summary(bundle)["rollouts"])
    assert retries >= 1
