"""One verifiable bundle per recorded optimizer step of TRL's ``GRPOTrainer``.

``recorder = BatchRecorder(output_dir, model_dir=BASE, factory=factory)`` then
``recorder.attach(trainer)`` before ``trainer.train()``. Attaching checks the trainer's
configuration against the batch mapping (docs/trl.md: one generation batch per optimizer
step, ``num_generations`` = the factory's ``group_size``, whole groups per process, a PEFT
adapter, the model directory's own chat template, no dropout where TRL samples) and
refuses anything ambiguous with ``trl_batch_ambiguous``. It then wraps these methods of
that trainer instance:

* ``_generate_and_score_completions``: before the batch is generated, the PEFT adapter is
  saved (the behaviour weights: :mod:`.identity`, read as PEFT saves it by
  :mod:`.snapshot`); after, the batch's episodes are
  finished, the environment's re-inspection is started in the recording worker (it runs
  while TRL trains; the bundle requires it unchanged), and the behaviour log-probabilities
  are arranged (:mod:`.logprobs`: the sampler's own, or TRL's training forward's);
* ``_generate``: the prompts as rendered (reset text appended), TRL's prompt and completion
  ids, ``tool_mask`` and the conversation turns;
* ``_calculate_rewards``: this process's rows of the reward matrix, combined with TRL's
  reward weights: the reward TRL trained with;
* ``_compute_loss`` and ``_get_per_token_logps_and_entropies``: the training forward's
  per-token log-probabilities of each recorded row (:class:`.logprobs.TrainingForward`).

As soon as the batch is fully captured (TRL's loss scored its last row, before that
micro-batch's backward pass and the optimizer step), every file of the bundle is built and
checked, so a batch that cannot be recorded fails before the weights change. When the
optimizer step that consumed the batch ends (``on_step_end``), the bundle is handed to the
recording worker, which publishes it (in step order, so its writes and fsyncs overlap the
next step; :meth:`BatchRecorder.wait`, also called at ``on_train_end``, waits for them) as
one directory, ``OUTPUT/rank-RRRRR/step-SSSSSS/``, with no-clobber atomic
publication (:func:`~kiln_verify.core.publish.publish_directory`): a step that fails, or a
process killed before that, leaves no bundle. The directory holds the three OpenEnv files
(``openenv.rollouts.jsonl``, ``openenv.replay.json``, ``openenv.rollout-summary.json``,
the collector's own builder), the recorded-GRPO corpus ``grpo.train.jsonl`` and the
behaviour adapter ``adapter/``. With ``every=N`` only steps ``N, 2N, ...`` are recorded
(the others pay nothing).

The recording worker (:mod:`.worker`, one process per training process) builds the corpus,
re-inspects the environment and publishes, so none of that takes the interpreter lock from
TRL's training thread. ``worker=False`` does all three in this process instead (the corpus
on the training thread, the re-inspection on the environment's background loop, the
publication on a background thread): the same bundles, byte for byte.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kiln_verify.errors import (
    KilnError,
    TargetExists,
    TrlBatchAmbiguous,
    TrlRecordingFailed,
    UsageError,
)
from kiln_verify.openenv.collect.bundle import build_bundle
from kiln_verify.trl.batch import (
    GRPO,
    CapturedBatch,
    CorpusJob,
    bundle_files,
    reinspect,
)
from kiln_verify.trl.corpus import grpo_rows
from kiln_verify.trl.factory import OpenEnvToolFactory
from kiln_verify.trl.identity import BaseModel
from kiln_verify.trl.logprobs import TrainingForward
from kiln_verify.trl.snapshot import AdapterReader
from kiln_verify.trl.trainer_check import check_trainer
from kiln_verify.trl.worker import RecordingWorker

__all__ = ["BatchRecorder"]


@contextlib.contextmanager
def _refusals(step: int) -> Iterator[None]:
    """A step's recording refusals: the library's own errors as raised, anything else a
    value the bundle rules cannot take (``trl_recording_failed``)."""
    try:
        yield
    except KilnError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise TrlRecordingFailed(f"step {step}: {str(exc)[:300]}") from None


class BatchRecorder:
    """See the module text. ``factory``: the :class:`OpenEnvToolFactory` the trainer uses;
    ``rollout``: an :class:`~kiln_verify.trl.rollout.OpenEnvRolloutFunc` instead;
    ``worker``: whether the recording worker process does the corpus, the re-inspection
    and the publication (see the module text)."""

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        *,
        model_dir: str | os.PathLike[str],
        factory: OpenEnvToolFactory | None = None,
        rollout: Any = None,
        every: int = 1,
        worker: bool = True,
    ) -> None:
        if (factory is None) == (rollout is None):
            raise UsageError("give exactly one of `factory` and `rollout`")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise UsageError("`every` must be a positive integer")
        # absolute: the worker publishes from the directory it started in, not this cwd
        self.output_dir = Path(output_dir).absolute()
        self.base = BaseModel(model_dir)
        self.factory = factory
        self.rollout = rollout
        self.every = every
        self.worker = worker
        self._worker: RecordingWorker | None = None
        self.published: list[Path] = []
        self._publisher: concurrent.futures.ThreadPoolExecutor | None = None
        self._publishing: list[tuple[Path, concurrent.futures.Future[None]]] = []
        self._trainer: Any = None
        self._adapter = AdapterReader()
        self._batch: CapturedBatch | None = None

    @property
    def _run(self) -> Any:
        return self.factory.run if self.factory is not None else self.rollout.run

    def attach(self, trainer: Any) -> None:
        """Check ``trainer`` and start recording its steps."""
        from transformers import TrainerCallback

        check_trainer(
            trainer,
            self._run.group_size,
            self.base,
            factory=self.factory is not None,
            rollout_temperature=None if self.rollout is None else self._run.options.temperature,
        )
        rank = trainer.accelerator.process_index
        if rank != self._run.rank:
            raise TrlBatchAmbiguous(
                f"this process is rank {rank}, its factory rank {self._run.rank}"
            )
        self._trainer = trainer
        self.rank = rank
        if self.worker:  # the rollout path's corpus is its collector's: nothing to re-render
            sources = self.base.rerender_sources() if self.factory is not None else None
            self._worker = RecordingWorker(sources)
        generate = trainer._generate
        score = trainer._generate_and_score_completions
        rewards = trainer._calculate_rewards
        recorder = self

        def recorded_score(inputs: Any) -> Any:
            return recorder._score(score, inputs)

        def recorded_generate(prompts: Any) -> Any:
            output = generate(prompts)
            if recorder._batch is not None:
                recorder._batch.generated(prompts, output)
            return output

        def recorded_rewards(inputs: Any, prompts: Any, completions: Any, ids: Any) -> Any:
            matrix = rewards(inputs, prompts, completions, ids)
            if recorder._batch is not None:
                recorder._batch.rewarded(trainer, matrix, len(prompts))
            return matrix

        trainer._generate_and_score_completions = recorded_score
        trainer._generate = recorded_generate
        trainer._calculate_rewards = recorded_rewards
        TrainingForward(trainer, self._trained)

        class _StepEnd(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                recorder._step_end(state.global_step)

            def on_pre_optimizer_step(
                self, args: Any, state: Any, control: Any, **kwargs: Any
            ) -> None:
                recorder._collect_corpus(recorder._batch)

            def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                recorder.wait()

        trainer.add_callback(_StepEnd())

    def _score(self, score: Any, inputs: Any) -> Any:
        trainer = self._trainer
        step = trainer.state.global_step + 1  # the optimizer step this batch feeds
        if not trainer.model.training or (step % self.every) != 0:
            self._batch = None
            return score(inputs)
        snapshot = self._adapter.snapshot(trainer.model)
        batch = self._batch = CapturedBatch(step, snapshot)
        if self.rollout is not None:
            self.rollout.snapshot = snapshot
        try:
            output = score(inputs)
            if self.factory is not None:
                run = self.factory.run
                for episode in self.factory.batch:
                    episode.finish()  # cached: TRL's get_reward finished them already
                if self._worker is not None:
                    batch.inspection = self._worker.inspect(run.url, run.credential())
                else:
                    batch.inspection = run.loop.submit(reinspect(run.client))
            batch.scored(output)
            if batch.complete:  # the sampler's log-probabilities: nothing left to capture
                self._build(batch)
        except BaseException:
            self._batch = None
            raise
        return output

    def _trained(self, rows: list[int], logps: Any) -> None:
        batch = self._batch
        if batch is None:
            return
        batch.trained(rows, logps)
        if batch.complete:  # TRL's loss scored the batch's last row
            self._build(batch)

    def _target(self, step: int) -> Path:
        return self.output_dir / f"rank-{self.rank:05d}" / f"step-{step:06d}"

    def _build(self, batch: CapturedBatch) -> None:
        """Build and check every file of the step's bundle as soon as the batch is fully
        captured: inside the loss of its last micro-batch (or right after scoring), before
        any backward pass of that micro-batch and before the optimizer step. A batch that
        cannot be recorded (environment identity changed, a reset that was not
        deterministic, a row the corpus rules or the token replay refuse, a taken target)
        therefore fails the step before TRL updates the weights; only the publication
        itself waits for the step's end."""
        target = self._target(batch.step)
        with _refusals(batch.step):
            if target.exists():
                raise TargetExists(
                    "the step's bundle directory already exists and is never replaced",
                    path=str(target),
                )
            files, corpus = bundle_files(batch, self, build_bundle)
            if not isinstance(corpus, CorpusJob):
                files[GRPO] = corpus
            elif self._worker is not None:
                batch.corpus = self._worker.corpus(corpus.completions, corpus.options)
            else:
                files[GRPO] = grpo_rows(
                    corpus.completions, rerender=self.base.rerender(), **corpus.options
                )
            batch.files = files

    def _collect_corpus(self, batch: CapturedBatch | None) -> None:
        """The corpus the worker built for ``batch`` (before the optimizer step: a refusal
        fails the step before the weights change)."""
        if batch is None or batch.corpus is None:
            return
        future, batch.corpus = batch.corpus, None
        assert batch.files is not None
        with _refusals(batch.step):
            batch.files[GRPO] = future.result()

    def _step_end(self, step: int) -> None:
        batch, self._batch = self._batch, None
        if batch is None:
            return
        if batch.step != step:
            raise TrlRecordingFailed(f"the batch generated for step {batch.step} ended at {step}")
        self._collect_corpus(batch)
        if batch.files is None or GRPO not in batch.files:
            raise TrlRecordingFailed(
                f"step {step}: TRL's loss did not score every row of the batch before the "
                "optimizer step, so its behaviour log-probabilities are incomplete"
            )
        from kiln_verify.core.publish import publish_directory

        self._collect(block=False)
        target = self._target(step)
        target.parent.mkdir(parents=True, exist_ok=True)
        if self._worker is not None:
            future = self._worker.publish(target, batch.files, 0o755)
        else:
            if self._publisher is None:
                self._publisher = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="kiln-trl-publish"
                )
            future = self._publisher.submit(publish_directory, target, batch.files, dir_mode=0o755)
        self._publishing.append((target, future))

    def _collect(self, *, block: bool) -> None:
        """Move finished publications to ``published``, in step order; raise the first
        that failed (its bundle does not exist: publication is atomic)."""
        while self._publishing and (block or self._publishing[0][1].done()):
            target, future = self._publishing.pop(0)
            future.result()
            self.published.append(target)

    def wait(self) -> list[Path]:
        """Wait for the bundles still being written and return every published one.
        Publication runs in the recording worker (or on one background thread), in step
        order, so a step's writes and fsyncs overlap the next step; a failed publication
        is raised here, at the next step's end, or at the end of training
        (``on_train_end`` calls this). After a training run that raised, call it to learn
        which bundles were published."""
        self._collect(block=True)
        return self.published
