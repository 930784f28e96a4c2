"""``rollout_func`` for TRL's ``GRPOTrainer`` on plain OpenEnv step loops (no tool calling).

For environments whose actions are not tool-shaped, the episode is the collector's own:
each call runs :func:`~kiln_verify.openenv.collect.collect` (the contract's prompt built
from the reset observation, one JSON action per model turn judged by the collector's rule,
the outcome table, group integrity, revalidation) with the trainer's live model as a
:class:`~kiln_verify.openenv.policy.transformers_policy.TransformersPolicy` (seeded
sampling, exact token provenance, one token stream per multi-turn episode), and builds the
recorded-GRPO corpus with the collector's own writer (replayed before it is kept). TRL is
then handed exactly those rows, converted as the bundle's ``train.py`` converts them
(kiln-hf-trl-contract §3.4): ``prompt_ids`` = ``input_token_ids[:prompt_token_count]``,
``completion_ids`` the rest, ``logprobs`` the recorded behaviour log-probability at sampled
positions and 0.0 elsewhere, ``env_mask`` 1 exactly at sampled positions; the episode
return travels as the extra field ``kiln_episode_return`` and :meth:`OpenEnvRolloutFunc.
reward` returns it. So the live update and ``train.py`` on the step's corpus see the same
samples.

TRL hands the function its prompts already repeated ``num_generations`` times; each block
of ``group_size`` consecutive identical prompts is one group (a block of different prompts
is refused), and the prompt text is not shown to the model: the environment's reset
observation is the prompt, as in ``kiln-verify rollout``. The reset payload is the
configured template with the seed rule's seed. Episodes run ``options.concurrency`` at a
time, so a single-session server is served one episode after another, each waiting for
capacity as the collector does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import (
    CapacityExhausted,
    TrlBatchAmbiguous,
    TrlBatchOverCapacity,
    TrlRecordingFailed,
)
from kiln_verify.hf.manifest import GrpoGroup
from kiln_verify.limits import MAX_GRPO_ROW_BYTES
from kiln_verify.openenv.collect import CollectionControls, CollectionOptions, collect
from kiln_verify.openenv.collect.engine import Collection
from kiln_verify.openenv.collect.grpo_corpus import build_grpo_corpus
from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy
from kiln_verify.records import BehaviorPolicyIdentity
from kiln_verify.trl.identity import ADAPTER_NAME, AdapterSnapshot, adapter_snapshot
from kiln_verify.trl.run import OpenEnvRun, reset_template

__all__ = ["OpenEnvRolloutFunc", "trl_sample"]


def trl_sample(completion: Any) -> tuple[list[int], list[int], list[float], list[int]]:
    """One recorded completion as TRL's ``(prompt_ids, completion_ids, logprobs, env_mask)``."""
    provenance = completion.provenance
    ids = list(provenance.input_token_ids)
    count = provenance.prompt_token_count
    logprobs = [0.0] * (len(ids) - count)
    mask = [0] * (len(ids) - count)
    for token in provenance.action_tokens:
        if token.source == "sampled":
            logprobs[token.sequence_index - count] = float(token.behavior_logprob)
            mask[token.sequence_index - count] = 1
    return ids[:count], ids[count:], logprobs, mask


class OpenEnvRolloutFunc:
    """TRL's ``rollout_func`` over one OpenEnv server (see the module text)."""

    def __init__(
        self,
        url: str,
        *,
        model_dir: str,
        options: CollectionOptions,
        reset: Mapping[str, Any] | None = None,
        credential_env: str | None = None,
        environ: Mapping[str, str] | None = None,
        rank: int | None = None,
    ) -> None:
        self.template = reset_template({"reset": dict(reset or {})})
        self.model_dir = model_dir
        self.run = OpenEnvRun(
            url, options=options, credential_env=credential_env, environ=environ, rank=rank
        )
        self.snapshot: AdapterSnapshot | None = None
        self._pending: tuple[Collection, bytes] | None = None

    def _groups(self, prompts: Sequence[Any]) -> int:
        size = self.run.group_size
        if not prompts or len(prompts) % size:
            raise TrlBatchAmbiguous(f"{len(prompts)} prompts are not whole groups of {size}")
        for first in range(0, len(prompts), size):
            block = [dumps_canonical(p) for p in prompts[first : first + size]]
            if any(text != block[0] for text in block):
                raise TrlBatchAmbiguous(
                    f"prompts {first}..{first + size - 1} are not one prompt repeated "
                    "`num_generations` times"
                )
        return len(prompts) // size

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        groups = self._groups(prompts)
        model = trainer.model
        snapshot = self.snapshot or adapter_snapshot(model)
        self.snapshot = None
        adapter = {"name": ADAPTER_NAME, "content_sha256": snapshot.content_sha256}
        policy = TransformersPolicy.bound(
            self.model_dir, model, trainer.processing_class, adapter=adapter
        )
        run = self.run
        run.begin_batch()
        run.groups_started += groups
        slots = (run.credential_env,) if run.credential_env is not None else ()
        controls = CollectionControls.create(
            [run.url],
            reset_templates=[self.template],
            credential_envs=slots,
            options=dataclasses.replace(
                run.options, groups=groups, seed_start=run.batch_seed_start
            ),
            grpo_output="grpo.train.jsonl",
        )
        was_training = model.training
        model.eval()
        try:
            collection = run.loop.run(collect(controls, policy))
        except CapacityExhausted as exc:
            raise TrlBatchOverCapacity(
                f"no session slot within the wait bound: {exc.rule}"
            ) from None
        finally:
            model.train(was_training)
        corpus = build_grpo_corpus(
            collection, policy.tokenizer_identity(), codec=policy.token_codec()
        )
        self._pending = (collection, corpus)
        out: dict[str, Any] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "kiln_episode_return": [],
        }
        for line in corpus.splitlines():
            for completion in GrpoGroup.model_validate(
                loads(line, max_bytes=MAX_GRPO_ROW_BYTES)
            ).completions:
                prompt, rest, logprobs, mask = trl_sample(completion)
                out["prompt_ids"].append(prompt)
                out["completion_ids"].append(rest)
                out["logprobs"].append(logprobs)
                out["env_mask"].append(mask)
                out["kiln_episode_return"].append(completion.reward)
        return out

    def reward(self, prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float]:
        """The episode returns of the batch (pass as TRL's ``reward_funcs``)."""
        returns = kwargs.get("kiln_episode_return")
        if not isinstance(returns, list):
            raise TrlBatchAmbiguous("the reward needs the rollout's `kiln_episode_return` field")
        return [float(value) for value in returns]

    def take(self, behavior: BehaviorPolicyIdentity) -> tuple[Collection, bytes]:
        """The last batch's collection and corpus (the recorder's; ``behavior`` unused: the
        collection already carries the policy's identity with the same adapter)."""
        del behavior
        if self._pending is None:
            raise TrlRecordingFailed("the rollout_func produced no batch for this step")
        pending, self._pending = self._pending, None
        return pending

    def close(self) -> None:
        self.run.close()
