"""The GRPO training corpus of a collection (``--grpo-output``; docs/contract.md).

Mapping (kiln-hf-trl-contract §4.7): one collected group → one ``GrpoGroup`` row, in plan
order. ``messages`` are the group's shared initial messages (the prompt every candidate
saw; group integrity already proved them identical). Each candidate, in candidate order,
becomes one completion:

- ``text``: the model's final content, exactly as the policy decoded it (the part after
  ``</think>`` when thinking; what the action was parsed from);
- ``reward``: the episode return, as in the OpenEnv corpus line (penalties included);
- no ``trajectory``: the episode is one generation, so every completion token is an action
  token and the record needs no segment layout;
- ``provenance``: :func:`~kiln_verify.hf.manifest.grpo.rollout_provenance` of the policy's
  :class:`~kiln_verify.openenv.policy.base.TokenProvenance`, with the collection's
  behaviour-policy identity and the policy's tokenizer identity.

Only single-action episodes are exact (a multi-step episode interleaves observations the
provenance cannot carry), so the controls refuse anything else up front; this module
re-checks and fails with ``grpo_corpus_unrepresentable`` rather than write an inexact row.
Rows are the canonical compact final-LF bytes ``hf export-grpo`` requires.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from kiln_verify.errors import GrpoCorpusUnrepresentable, KilnError
from kiln_verify.hf.manifest import GrpoGroup, grpo_row_bytes
from kiln_verify.hf.manifest.grpo import GrpoCompletion, TokenizerIdentity, rollout_provenance
from kiln_verify.openenv.collect.engine import CollectedGroup, Collection
from kiln_verify.records import BehaviorPolicyIdentity

__all__ = ["build_grpo_corpus"]


def _row(
    group: CollectedGroup, behavior: BehaviorPolicyIdentity, tokenizer: TokenizerIdentity
) -> bytes:
    index = group.plan.group_index
    completions = []
    for episode in group.episodes:
        where = f"group {index} candidate {episode.candidate_index}"
        if len(episode.generations) != 1:
            raise GrpoCorpusUnrepresentable(
                f"{where}: the episode has {len(episode.generations)} model calls; a GRPO "
                "completion holds exactly one"
            )
        generation = episode.generations[0]
        try:
            provenance = rollout_provenance(
                generation.provenance,
                messages=group.messages,
                text=generation.text,
                behavior_policy=behavior,
                tokenizer=tokenizer,
            )
            completions.append(
                GrpoCompletion(
                    text=generation.text,
                    reward=episode.rollout.reward,
                    trajectory=None,
                    provenance=provenance,
                )
            )
        except (ValidationError, KilnError) as exc:
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


def build_grpo_corpus(collection: Collection, tokenizer: Mapping[str, str]) -> bytes:
    """The whole corpus: one canonical row per group, in plan order."""
    identity = TokenizerIdentity.model_validate(dict(tokenizer))
    return b"".join(_row(group, collection.behavior, identity) for group in collection.groups)
