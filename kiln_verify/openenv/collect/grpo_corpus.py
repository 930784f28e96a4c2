"""The GRPO training corpus of a collection (``--grpo-output``; docs/contract.md).

Mapping (kiln-hf-trl-contract §4.7): one collected group → one ``GrpoGroup`` row, in plan
order. ``messages`` are the group's shared initial messages (the prompt every candidate
saw; group integrity already proved them identical). Each candidate, in candidate order,
becomes one completion whose ``reward`` is the episode return, exactly as in the OpenEnv
corpus line (penalties included), and whose ``provenance`` carries the collection's
behaviour-policy identity and the policy's tokenizer identity.

- ``--max-steps 1``: ``text`` is the model's final content (what the action was parsed
  from), there is no ``trajectory`` and every completion token is an action token
  (:func:`~kiln_verify.hf.manifest.grpo.rollout_provenance` of the one generation).
- ``--max-steps`` above 1: ``text`` and ``trajectory`` are the OpenEnv completion's own
  (the ``<TURN_BREAK>``-joined actions; every action, observation, protocol-error and
  harness-feedback segment, an ``invalid_model_action`` or ``protocol_error`` tail
  included), and the provenance is the episode's one token stream
  (docs/hf-contract.md, "The token stream of a trajectory"): the last model call's
  sequence, whose action tokens are every call's completion tokens at their positions. Each
  call must continue the previous one's sequence (the policy does, given ``prior``);
  ``seed`` is the first call's generation seed (call ``k`` used ``seed XOR (k *
  0xBF58476D1CE4E5B9)``) and ``sampling.max_tokens`` bounds each call.

With a thinking budget, ``sampling.thinking_budget`` is ``{max_tokens, close_token_ids}``
(the policy's :meth:`thinking_close_token_ids`). When the policy exposes its
:class:`~kiln_verify.tokens.TokenCodec`, every multi-turn row is re-rendered before it is
written (the check ``hf export-grpo`` makes), so a corpus the exporter would refuse is
refused here, at collection time. Anything inexact is ``grpo_corpus_unrepresentable``.
Rows are the canonical compact final-LF bytes ``hf export-grpo`` requires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from kiln_verify.errors import GrpoCorpusUnrepresentable, KilnError, TokenStreamError
from kiln_verify.hf.digests import prompt_messages_digest, scored_payload_digest
from kiln_verify.hf.manifest import GrpoGroup, grpo_row_bytes
from kiln_verify.hf.manifest.grpo import (
    ROLLOUT_PROVENANCE,
    GrpoCompletion,
    RolloutProvenance,
    ThinkingBudget,
    TokenizerIdentity,
    rollout_provenance,
)
from kiln_verify.openenv.collect.assemble import EpisodeResult
from kiln_verify.openenv.collect.engine import CollectedGroup, Collection
from kiln_verify.openenv.collect.machine import Generation
from kiln_verify.records import BehaviorPolicyIdentity
from kiln_verify.tokens import ActionBudget, TokenCodec, rerender_trajectory

__all__ = ["build_grpo_corpus", "stream_provenance"]


def stream_provenance(
    generations: Sequence[Generation],
    *,
    messages: Sequence[Any],
    text: str,
    trajectory: Sequence[Any],
    behavior_policy: BehaviorPolicyIdentity,
    tokenizer: TokenizerIdentity,
    thinking_budget: ThinkingBudget | None,
) -> RolloutProvenance:
    """One episode's token stream as ``kiln.rollout-provenance.v1``.

    Raises ``ValueError`` when a call does not continue the previous call's sequence or
    changes its sampling, template arguments or backend."""
    first = generations[0].provenance
    stream: tuple[int, ...] = first.input_token_ids
    actions = first.action_tokens()
    for step, generation in enumerate(generations[1:], start=1):
        token = generation.provenance
        if token.prompt_token_ids[: len(stream)] != stream:
            raise ValueError(f"step {step} does not continue the recorded token stream")
        if (token.sampling, dict(token.template_kwargs), token.generation_backend) != (
            first.sampling,
            dict(first.template_kwargs),
            first.generation_backend,
        ):
            raise ValueError(f"step {step} changed the sampling or template arguments")
        actions += token.action_tokens()
        stream = token.input_token_ids
    sampling = first.sampling.to_dict()
    if thinking_budget is not None:
        sampling["thinking_budget"] = thinking_budget
    fields: dict[str, Any] = {
        "schema": ROLLOUT_PROVENANCE,
        "input_token_ids": list(stream),
        "prompt_token_count": first.prompt_token_count,
        "prompt_messages_sha256": str(prompt_messages_digest(messages)),
        "scored_payload_sha256": str(scored_payload_digest(text, list(trajectory))),
        "action_tokens": actions,
        "behavior_policy": behavior_policy,
        "tokenizer": tokenizer,
        "sampling": sampling,
        "seed": first.seed,
        "generation_backend": first.generation_backend,
    }
    if first.template_kwargs:
        fields["template_invocation"] = {"template_kwargs": dict(first.template_kwargs)}
    return RolloutProvenance.model_validate(fields)


class _Writer:
    """Everything one corpus needs besides the groups: identities, budget, re-rendering codec."""

    def __init__(
        self,
        collection: Collection,
        tokenizer: Mapping[str, str],
        close_token_ids: Sequence[int] | None,
        codec: TokenCodec | None,
    ) -> None:
        controls = collection.controls
        self.behavior = collection.behavior
        self.tokenizer = TokenizerIdentity.model_validate(dict(tokenizer))
        self.multi_turn = controls.options.max_steps > 1
        self.budget: ThinkingBudget | None = None
        if controls.options.thinking_budget_tokens is not None:
            if not close_token_ids:
                raise GrpoCorpusUnrepresentable(
                    "a thinking budget was set but the policy names no close tokens"
                )
            self.budget = ThinkingBudget(
                max_tokens=controls.options.thinking_budget_tokens,
                close_token_ids=list(close_token_ids),
            )
        self.codec = codec

    def completion(self, group: CollectedGroup, episode: EpisodeResult) -> GrpoCompletion:
        generations = episode.generations
        if not self.multi_turn:
            if len(generations) != 1:
                raise ValueError(f"the episode has {len(generations)} model calls, not 1")
            generation = generations[0]
            provenance = rollout_provenance(
                generation.provenance,
                messages=group.messages,
                text=generation.text,
                behavior_policy=self.behavior,
                tokenizer=self.tokenizer,
                thinking_budget=self.budget,
            )
            return GrpoCompletion(
                text=generation.text,
                reward=episode.rollout.reward,
                trajectory=None,
                provenance=provenance,
            )
        rollout = episode.rollout
        actions = sum(1 for segment in rollout.trajectory if segment.kind == "action")
        if not generations or actions != len(generations):
            raise ValueError(f"{len(generations)} model calls for {actions} action segments")
        provenance = stream_provenance(
            generations,
            messages=group.messages,
            text=rollout.text,
            trajectory=rollout.trajectory,
            behavior_policy=self.behavior,
            tokenizer=self.tokenizer,
            thinking_budget=self.budget,
        )
        completion = GrpoCompletion(
            text=rollout.text,
            reward=rollout.reward,
            trajectory=list(rollout.trajectory),
            provenance=provenance,
        )
        if self.codec is not None:
            self._rerender(group, completion)
        return completion

    def _rerender(self, group: CollectedGroup, completion: GrpoCompletion) -> None:
        assert self.codec is not None
        assert completion.trajectory is not None
        provenance = completion.provenance
        invocation = (
            provenance.template_invocation.to_json()
            if provenance.template_invocation is not None
            else {}
        )
        budget = self.budget
        rerender_trajectory(
            self.codec,
            invocation,
            messages=[message.to_json() for message in group.messages],
            segments=completion.trajectory,
            ids=provenance.input_token_ids,
            prompt_count=provenance.prompt_token_count,
            actions={token.sequence_index: token.source for token in provenance.action_tokens},
            budget=None
            if budget is None
            else ActionBudget(budget.max_tokens, None, tuple(budget.close_token_ids)),
            where="the token stream",
        )

    def row(self, group: CollectedGroup) -> bytes:
        index = group.plan.group_index
        completions = []
        for episode in group.episodes:
            where = f"group {index} candidate {episode.candidate_index}"
            try:
                completions.append(self.completion(group, episode))
            except KilnError as exc:
                if isinstance(exc, TokenStreamError):  # the rule's own code, at collection
                    raise type(exc)(f"{where}: {exc.rule}") from None
                raise GrpoCorpusUnrepresentable(f"{where}: {_reason(exc)}") from None
            except (ValidationError, ValueError) as exc:
                raise GrpoCorpusUnrepresentable(f"{where}: {_reason(exc)}") from None
        try:
            return grpo_row_bytes(GrpoGroup(messages=group.messages, completions=completions))
        except (ValidationError, KilnError) as exc:
            raise GrpoCorpusUnrepresentable(f"group {index}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        place = ".".join(str(part) for part in first["loc"])
        return f"{place or 'row'}: {first['msg']}"[:300]
    return str(exc)[:300]


def build_grpo_corpus(
    collection: Collection,
    tokenizer: Mapping[str, str],
    *,
    close_token_ids: Sequence[int] | None = None,
    codec: TokenCodec | None = None,
) -> bytes:
    """The whole corpus: one canonical row per group, in plan order."""
    writer = _Writer(collection, tokenizer, close_token_ids, codec)
    return b"".join(writer.row(group) for group in collection.groups)
