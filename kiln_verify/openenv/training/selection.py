"""Training selection: what of a complete collection is sent to GRPO (§5.7).

From the diagnostic collection (every group, in order):

1. a completion whose last trajectory segment parses as JSON with
   ``/openenv_harness_error/code == "MODEL_ACTION_NO_OUTPUT"`` is dropped on its own
   (``no_output_rollouts_discarded``): the model produced no action to learn from;
2. a group left with no completion is skipped (``no_usable_output_groups_skipped``);
3. a group whose remaining rewards are all equal (f64 ``==``, so ``0.0 == -0.0``, and a
   single remaining completion counts as equal) is skipped
   (``no_reward_gradient_groups_skipped``): GRPO's group-relative advantage is zero there.

Warnings name groups by 0-based index: one per partial discard (some, not all,
completions dropped) and one per skipped group. The counts and warnings fill the existing
``TrainingSelection`` record of the summary; warnings are omitted when there are none.
Nothing remaining (``groups == ()``) means the run completes without a trainer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kiln_verify.openenv.records.rollout import AgenticGroup, ScoredRollout
from kiln_verify.openenv.records.serialize import dataset_bytes
from kiln_verify.openenv.records.summary import TrainingSelection

__all__ = [
    "NO_OUTPUT_CODE",
    "Selection",
    "is_no_output",
    "select_for_training",
]

NO_OUTPUT_CODE: Final = "MODEL_ACTION_NO_OUTPUT"
_MARKER: Final = '"openenv_harness_error"'


def is_no_output(completion: ScoredRollout) -> bool:
    """Whether the completion ended with a ``MODEL_ACTION_NO_OUTPUT`` harness error.

    Only the last segment counts, and only when it is a JSON object whose
    ``openenv_harness_error.code`` is that code (a JSON pointer that misses, or content
    that is not JSON, is not "no output")."""
    content = completion.trajectory[-1].content
    if _MARKER not in content:  # the common case costs no parse
        return False
    try:
        value = json.loads(content)
    except ValueError:
        return False
    if not isinstance(value, dict):
        return False
    error = value.get("openenv_harness_error")
    return isinstance(error, dict) and error.get("code") == NO_OUTPUT_CODE


@dataclass(frozen=True, slots=True)
class Selection:
    """The groups to train on (completions in their original order) and the record."""

    groups: tuple[AgenticGroup, ...]
    record: TrainingSelection

    def corpus_bytes(self) -> bytes:
        """The selected corpus as JSONL (the collector's line bytes): the admitted corpus
        whose SHA-256 the train receipt binds. Empty when nothing was selected."""
        return dataset_bytes(self.groups)


def _has_gradient(rewards: list[float]) -> bool:
    first = rewards[0]
    return any(reward != first for reward in rewards[1:])


def select_for_training(groups: Sequence[AgenticGroup]) -> Selection:
    """Apply §5.7 to ``groups`` (the collection's corpus, group order)."""
    kept_groups: list[AgenticGroup] = []
    warnings: list[str] = []
    discarded = no_usable = no_gradient = rollouts = 0
    for index, group in enumerate(groups):
        kept = [c for c in group.completions if not is_no_output(c)]
        dropped = len(group.completions) - len(kept)
        discarded += dropped
        if not kept:
            no_usable += 1
            warnings.append(
                f"group {index}: skipped, all {dropped} rollouts ended with {NO_OUTPUT_CODE}"
            )
            continue
        if dropped:
            warnings.append(
                f"group {index}: discarded {dropped} of {len(group.completions)} rollouts "
                f"that ended with {NO_OUTPUT_CODE}"
            )
        if not _has_gradient([c.reward for c in kept]):
            no_gradient += 1
            warnings.append(
                f"group {index}: skipped, no reward gradient "
                f"({len(kept)} remaining rollouts with equal rewards)"
            )
            continue
        kept_groups.append(group if not dropped else group.model_copy(update={"completions": kept}))
        rollouts += len(kept)
    record = TrainingSelection(
        groups_submitted=len(kept_groups),
        rollouts_submitted=rollouts,
        no_output_rollouts_discarded=discarded,
        no_usable_output_groups_skipped=no_usable,
        no_reward_gradient_groups_skipped=no_gradient,
        warnings=warnings or None,
    )
    return Selection(tuple(kept_groups), record)
