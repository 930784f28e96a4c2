"""What the recorder captured of one generation batch, and the bundle files built from it.

The OpenEnv files are the collector's: the batch's episodes are assembled by the
collector's own step (:func:`~kiln_verify.openenv.collect.assemble_collection`: controls
with this batch's groups, group size and ``seed_start``; every group's candidates started
alike; the environment re-inspected and required unchanged) into a
:class:`~kiln_verify.openenv.collect.engine.Collection` handed to
:func:`~kiln_verify.openenv.collect.bundle.build_bundle`.
The GRPO corpus comes from :mod:`.corpus` (factory path: a :class:`CorpusJob` the recorder
runs in its recording worker, :mod:`.worker`) or from the ``rollout_func``'s own collector
corpus with TRL's trained rewards (rollout path).
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import math
from collections.abc import Callable
from typing import Any

from kiln_verify.errors import (
    ResetNondeterministic,
    TrlBatchAmbiguous,
    TrlRecordingFailed,
    TrlRewardNotFinite,
)
from kiln_verify.hf.manifest import GrpoGroup, grpo_row_bytes
from kiln_verify.limits import (
    MAX_ACTION_TOKENS,
    MAX_CONCURRENCY,
    MAX_GRPO_ROW_BYTES,
    TRL_EPISODE_TIMEOUT_S,
)
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.engine import CollectedGroup, Collection
from kiln_verify.openenv.collect.steps import Environments, assemble_collection
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.records import BehaviorPolicyIdentity
from kiln_verify.trl.corpus import TrlCompletion
from kiln_verify.trl.identity import AdapterSnapshot
from kiln_verify.trl.logprobs import ROW_KEY
from kiln_verify.trl.worker import Reinspection

__all__ = [
    "GRPO",
    "CapturedBatch",
    "CorpusJob",
    "bundle_files",
    "generation_parameters",
    "reinspect",
    "sampling_record",
]

DATASET, REPLAY, SUMMARY, GRPO = (
    "openenv.rollouts.jsonl",
    "openenv.replay.json",
    "openenv.rollout-summary.json",
    "grpo.train.jsonl",
)


def sampling_record(args: Any) -> dict[str, Any]:
    """TRL's sampling configuration as ``kiln.rollout-provenance.v1`` ``sampling``."""
    return {
        "temperature": float(args.temperature),
        "top_p": float(args.top_p),
        "top_k": int(args.top_k or 0),
        "min_p": float(args.min_p or 0.0),
        "max_tokens": int(args.max_completion_length),
        "repetition_penalty": float(args.repetition_penalty),
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "stop": [],
    }


def generation_parameters(args: Any) -> dict[str, Any]:
    """What the behaviour identity's ``inference_config_sha256`` binds."""
    return {
        "generator": "trl.GRPOTrainer",
        "sampling": sampling_record(args),
        "use_vllm": bool(args.use_vllm),
        "vllm_mode": str(args.vllm_mode) if args.use_vllm else None,
        "chat_template_kwargs": dict(args.chat_template_kwargs or {}),
        "generation_kwargs": dict(args.generation_kwargs or {}),
        "cache_implementation": args.cache_implementation,
        "max_tool_calling_iterations": args.max_tool_calling_iterations,
    }


class CapturedBatch:
    """One generation batch as seen through the three wrapped trainer methods."""

    def __init__(self, step: int, adapter: AdapterSnapshot) -> None:
        self.step = step
        self.adapter = adapter
        self.prompts: list[Any] = []
        self.prompt_ids: list[list[int]] = []
        self.completion_ids: list[list[int]] = []
        self.tool_mask: list[list[int]] = []
        self.turns: list[list[dict[str, Any]]] = []
        self.rewards: list[float] = []
        self.logprobs: list[list[float] | None] = []
        self.inspection: concurrent.futures.Future[Reinspection] | None = None
        self.files: dict[str, bytes] | None = None
        self.corpus: concurrent.futures.Future[bytes] | None = None

    def generated(self, prompts: list[Any], output: tuple[Any, ...]) -> None:
        prompt_ids, completion_ids, tool_mask, completions = output[:4]
        self.prompts = copy.deepcopy(list(prompts))
        self.prompt_ids = [[int(t) for t in ids] for ids in prompt_ids]
        self.completion_ids = [[int(t) for t in ids] for ids in completion_ids]
        if tool_mask is None:
            self.tool_mask = [[1] * len(ids) for ids in self.completion_ids]
        else:
            self.tool_mask = [[int(v) for v in mask] for mask in tool_mask]
        self.turns = [copy.deepcopy(list(c)) if isinstance(c, list) else [] for c in completions]

    def rewarded(self, trainer: Any, matrix: Any, local: int) -> None:
        """This process's rows of the reward matrix, combined as TRL combines them."""
        index = trainer.accelerator.process_index
        rows = matrix[index * local : (index + 1) * local]
        weights = trainer.reward_weights.to(rows.device).unsqueeze(0)
        combined = (rows * weights).nansum(dim=1)
        unscorable = rows.isnan().all(dim=1)
        values = []
        for value, missing in zip(combined.tolist(), unscorable.tolist(), strict=True):
            if missing or not math.isfinite(value):
                raise TrlRewardNotFinite(f"a completion's combined reward is {value!r}")
            values.append(float(value))
        self.rewards = values

    def scored(self, output: dict[str, Any]) -> None:
        """The behaviour log-probabilities (:mod:`.logprobs`): the sampler's, else a row
        index in TRL's batch so its training forward hands them to :meth:`trained`."""
        import torch

        ids = output["completion_ids"]
        if ids.size(0) != len(self.completion_ids):
            raise TrlRecordingFailed(
                f"TRL scored {ids.size(0)} completions of the {len(self.completion_ids)} generated"
            )
        self.logprobs = [None] * len(self.completion_ids)
        sampled = output.get("sampling_per_token_logps")
        if sampled is None:
            output[ROW_KEY] = torch.arange(ids.size(0), device=ids.device)
            return
        if output.get("old_per_token_logps") is None:
            output["old_per_token_logps"] = sampled.detach()
        self.trained(list(range(ids.size(0))), sampled)

    def trained(self, rows: list[int], logps: Any) -> None:
        """Rows ``rows`` of the batch scored ``logps`` (one row of values each)."""
        values = logps.detach().float().cpu().tolist()
        for row, scored in zip(rows, values, strict=True):
            if not 0 <= row < len(self.logprobs) or self.logprobs[row] is not None:
                raise TrlRecordingFailed(f"TRL's loss scored row {row} of the batch twice")
            self.logprobs[row] = scored[: len(self.completion_ids[row])]

    @property
    def complete(self) -> bool:
        """Whether every row has its behaviour log-probabilities."""
        return bool(self.logprobs) and all(row is not None for row in self.logprobs)

    def behaviour_logprobs(self) -> list[list[float]]:
        """Every row's log-probabilities, once TRL's loss scored the whole batch."""
        missing = sum(1 for row in self.logprobs if row is None)
        if missing or not self.logprobs:
            raise TrlRecordingFailed(
                f"TRL's loss scored {len(self.logprobs) - missing} of the batch's "
                f"{len(self.logprobs)} rows before the optimizer step"
            )
        return [row for row in self.logprobs if row is not None]


def _controls(run: Any, groups: int, args: Any, template: dict[str, Any]) -> CollectionControls:
    options = dataclasses.replace(
        run.options,
        groups=groups,
        seed_start=run.batch_seed_start,
        temperature=float(args.temperature),
        max_action_tokens=min(int(args.max_completion_length), MAX_ACTION_TOKENS),
        concurrency=min(groups * run.group_size, MAX_CONCURRENCY),
        state_check=False,
    )
    slots = (run.credential_env,) if run.credential_env is not None else ()
    return CollectionControls.create(
        [run.url], reset_templates=[template], credential_envs=slots, options=options
    )


async def reinspect(client: OpenEnvClient) -> Reinspection:
    """The environment's identity and schema now (the recording worker's ``inspect`` job,
    in-process)."""
    inspection = await client.inspect()
    return inspection.identity, inspection.environment_schema


def _reinspection(
    run: Any, inspection: concurrent.futures.Future[Reinspection] | None
) -> Reinspection:
    """The environment as re-inspected once the batch's episodes ended (started then by the
    recorder, so it overlaps TRL's training forward; in-process when it was not)."""
    if inspection is None:
        return run.loop.run(reinspect(run.client))  # type: ignore[no-any-return]
    return inspection.result(TRL_EPISODE_TIMEOUT_S)


def _different_reset(group: CollectedGroup, candidate: int) -> Exception:
    """The collector's integrity rule and code, named inside the recorder's own error."""
    return TrlRecordingFailed(
        f"group {group.plan.group_index}: candidate {candidate} was reset to another "
        "observation than candidate 0; reset(seed) must be deterministic "
        f"({ResetNondeterministic.code}, conformance case "
        f"{ResetNondeterministic.conformance_case})"
    )


def _collection(
    batch_episodes: list[Any],
    run: Any,
    args: Any,
    behavior: Any,
    inspection: concurrent.futures.Future[Reinspection] | None,
) -> Collection:
    """The batch's episodes assembled as the collector assembles its groups (the plan,
    group integrity, revalidation: :func:`~kiln_verify.openenv.collect.assemble_collection`)."""
    size = run.group_size
    if not batch_episodes or len(batch_episodes) % size:
        raise TrlBatchAmbiguous(f"{len(batch_episodes)} rollouts are not whole groups of {size}")
    groups = []
    for first in range(0, len(batch_episodes), size):
        members = batch_episodes[first : first + size]
        results = [episode.records(behavior) for episode in members]
        head = results[0]
        plan = members[0].slot.plan
        groups.append(CollectedGroup(plan, head.messages, head.reset_observation, results))
    controls = _controls(run, len(groups), args, batch_episodes[0].slot.template)
    return assemble_collection(
        controls,
        Environments((run.client,), (run.inspection,), (run.context,)),
        behavior,
        groups,
        lambda: [_reinspection(run, inspection)],
        during="the step",
        different_reset_error=_different_reset,
    )


def _with_rewards(corpus: bytes, rewards: list[float]) -> bytes:
    """The rollout's corpus with each completion's reward replaced by TRL's."""
    from kiln_verify.core.jsonio import loads

    rows, index = [], 0
    for line in corpus.splitlines():
        group = GrpoGroup.model_validate(loads(line, max_bytes=MAX_GRPO_ROW_BYTES))
        completions = []
        for completion in group.completions:
            completions.append(completion.model_copy(update={"reward": rewards[index]}))
            index += 1
        rows.append(grpo_row_bytes(GrpoGroup(messages=group.messages, completions=completions)))
    if index != len(rewards):
        raise TrlRecordingFailed(f"{index} recorded completions for {len(rewards)} rewards")
    return b"".join(rows)


@dataclasses.dataclass(frozen=True, slots=True)
class CorpusJob:
    """What the factory path's corpus is built from: ``grpo_rows(completions, rerender=...,
    **options)``, in the recording worker or in-process."""

    completions: list[TrlCompletion]
    options: dict[str, Any]


def bundle_files(
    batch: CapturedBatch, recorder: Any, build: Callable[..., Any]
) -> tuple[dict[str, bytes], CorpusJob | bytes]:
    """Every file of the step's bundle but the corpus (see the module text), and the corpus:
    its bytes (rollout path) or the job that builds them (factory path)."""
    trainer, base = recorder._trainer, recorder.base
    args = trainer.args
    behavior: BehaviorPolicyIdentity = base.behavior(batch.adapter, generation_parameters(args))
    count = len(batch.completion_ids)
    logprobs = batch.behaviour_logprobs()
    if not count or len(batch.rewards) != count:
        raise TrlRecordingFailed("the batch was not fully captured (generation, rewards, logps)")
    corpus: CorpusJob | bytes
    if recorder.factory is not None:
        factory = recorder.factory
        run = factory.run
        collection = _collection(factory.batch, run, args, behavior, batch.inspection)
        invocation: dict[str, Any] = {"tools": [factory.tool_schema()]}
        if args.chat_template_kwargs:
            invocation["template_kwargs"] = dict(args.chat_template_kwargs)
        completions = [
            TrlCompletion(
                messages=batch.prompts[i],
                prompt_ids=batch.prompt_ids[i],
                completion_ids=batch.completion_ids[i],
                tool_mask=batch.tool_mask[i],
                logprobs=logprobs[i],
                turns=batch.turns[i],
                reward=batch.rewards[i],
                seed=factory.batch[i].slot.plan.seed,
            )
            for i in range(count)
        ]
        options = {
            "group_size": run.group_size,
            "stop_ids": frozenset(int(i) for i in trainer.eos_token_ids),
            "behavior": behavior,
            "tokenizer": dict(base.tokenizer_identity),
            "invocation": invocation,
            "sampling": sampling_record(args),
        }
        corpus = CorpusJob(completions, options)
    else:
        collection, rows = recorder.rollout.take(behavior)
        corpus = _with_rewards(rows, batch.rewards)
    bundle = build(collection)
    files = {DATASET: bundle.dataset, REPLAY: bundle.replay, SUMMARY: bundle.summary}
    files.update(batch.adapter.files())
    return files, corpus
