"""A seeded Task API catalog: splits, rows, and reset by `{"split", "index"}`.

Every catalogued environment (the eight math families, and the synthesis tasks inducto
and logic) serves the same three splits. A row is nothing but a seed and a difficulty fixed
by formula, plus the SHA-256 of the `input_text` that resetting with them shows, so a
client can check that `reset {"split": s, "index": i}` selected exactly row `i`:

    train       200 rows, seeds 1_000_000 + i
    validation  100 rows, seeds 2_000_000 + i
    test        100 rows, seeds 3_000_000 + i      (difficulty of row i: 1 + i % 5)

The seed ranges are disjoint, and rows never carry an answer. Rows are computed once per
class and split, then cached.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Sequence
from typing import Literal

from oracle.base import Environment, ExecutionError, JsonObject, ResetRequest


@dataclasses.dataclass(frozen=True)
class Split:
    """One split: `size` rows whose seeds start at `first_seed`."""

    name: str
    type: Literal["train", "validation", "test"]
    first_seed: int
    size: int

    def seed(self, index: int) -> int:
        return self.first_seed + index

    @staticmethod
    def difficulty(index: int) -> int:
        return 1 + index % 5


SPLITS: tuple[Split, ...] = (
    Split("train", "train", 1_000_000, 200),
    Split("validation", "validation", 2_000_000, 100),
    Split("test", "test", 3_000_000, 100),
)
_BY_NAME = {split.name: split for split in SPLITS}
_KNOWN = ", ".join(_BY_NAME)


@dataclasses.dataclass(frozen=True)
class TaskChoice:
    """What a reset plays: a seed and difficulty, and the row they came from, if any."""

    seed: int
    difficulty: int
    split: str | None = None
    index: int | None = None

    def reference(self) -> JsonObject | None:
        """`{"split", "index"}` of the selected row, or None for a plain seeded reset."""
        if self.split is None:
            return None
        return {"split": self.split, "index": self.index}


def choose_task(request: ResetRequest) -> TaskChoice:
    """Resolve the reset options: a split selects a row, which overrides seed and difficulty.

    `index` defaults to `seed % size` when only a split is given (as the Task API guide
    recommends); an index without a split, an unknown split or an index out of range is
    an `ExecutionError`.
    """
    name = request.options.get("split")
    index = request.options.get("index")
    if name is None:
        if index is not None:
            raise ExecutionError(f"index needs a split: one of {_KNOWN}")
        return TaskChoice(request.seed, request.difficulty)
    split = _BY_NAME.get(name) if isinstance(name, str) else None
    if split is None:
        raise ExecutionError(f"unknown split: choose one of {_KNOWN}")
    if index is None:
        index = request.seed % split.size
    if isinstance(index, bool) or not isinstance(index, int):
        raise ExecutionError("index must be an integer")
    if not 0 <= index < split.size:
        raise ExecutionError(
            f"index {index} is out of range for split {split.name!r}: 0..{split.size - 1}"
        )
    return TaskChoice(split.seed(index), split.difficulty(index), split.name, index)


class CatalogEnvironment(Environment):
    """An environment with a real Task API; its `_reset` must start with `choose_task`."""

    reset_options = frozenset({"split", "index"})

    @classmethod
    def task_prompt(cls, seed: int, difficulty: int) -> str:
        """The `input_text` a plain reset with this seed and difficulty shows."""
        outcome = cls()._reset(ResetRequest(seed=seed, difficulty=difficulty, options={}))
        return str(outcome.observation["input_text"])

    @classmethod
    def task_splits(cls) -> Sequence[dict[str, str]]:
        return [{"name": split.name, "type": split.type} for split in SPLITS]

    @classmethod
    def task_rows(cls, split: str) -> Sequence[JsonObject]:
        if split not in _BY_NAME:
            raise KeyError(f"unknown split {split!r}; known: {_KNOWN}")
        return [dict(row) for row in _rows(cls, split)]


@functools.cache
def _rows(cls: type[CatalogEnvironment], name: str) -> tuple[JsonObject, ...]:
    split = _BY_NAME[name]
    rows = []
    for index in range(split.size):
        seed, difficulty = split.seed(index), split.difficulty(index)
        text = cls.task_prompt(seed, difficulty)
        rows.append(
            {
                "split": split.name,
                "index": index,
                "seed": seed,
                "difficulty": difficulty,
                "input_text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            }
        )
    return tuple(rows)
