"""The reset plan and the deterministic group plan (kiln-openenv-contract §5.2, §5.3).

Reset plan: one seed-free template per environment (any caller ``seed`` removed), bound
by ``reset_plan_sha256``. Group plan: group ``g`` uses environment ``g mod n``, seed
``seed_start + g`` and the reset payload = that environment's template with ``seed``
set. Both are pure functions of the controls, so a verifier can recompute them, and a
plan can start at any group (a shard): group ``g`` does not depend on where it started.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from kiln_verify.core.digest import Sha256Digest
from kiln_verify.errors import LimitExceeded
from kiln_verify.limits import MAX_RETAINED_BYTES
from kiln_verify.openenv.records.serialize import (
    effective_reset_payload,
    reset_plan_sha256,
    reset_sha256,
    seed_free_template,
)

__all__ = ["GroupPlan", "ResetPlan", "RetainedBudget", "group_plan"]

_SIZER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True)
_ORJSON_REFUSED: Final = (TypeError, ValueError, RecursionError)
_SIGNS_LOOKED_AT: Final = 8


def _parsed_size(value: Any) -> int:
    """``len(_SIZER.encode(value).encode("utf-8"))`` for a value the strict parser produced.

    Such values are plain dicts (str keys), lists, strs without lone surrogates, ints,
    finite floats, bools and None, which ``orjson`` and ``_SIZER`` write with the same
    escapes, separators and key order, integers alike. Floats are written alike (the
    shortest ``repr`` digits) unless ``repr`` uses an exponent: ``orjson`` then writes
    ``e+``/``e-`` (``1e-7`` for ``1e-07``) or, for 1e-5 <= |x| < 1e-4, ``0.0000...``
    (``0.00001`` for ``1e-05``). A text holding any of those byte strings (in a string or
    not) is measured with ``_SIZER`` itself, as is anything ``orjson`` refuses (integers
    beyond 64 bits).
    """
    try:
        raw = orjson.dumps(value)
    except _ORJSON_REFUSED:
        return len(_SIZER.encode(value).encode("utf-8"))
    if _may_differ(raw):
        return len(_SIZER.encode(value).encode("utf-8"))
    return len(raw)


def _may_differ(raw: bytes) -> bool:
    """Whether ``raw`` holds ``e+``, ``e-`` or ``0.0000``. The signs are found with
    ``memchr`` and their predecessor looked at (a two-byte search over text full of ``e``
    costs about as much as writing it); many ``-`` take the two-byte search instead."""
    if b"+" in raw and b"e+" in raw:
        return True
    at = raw.find(b"-", 1)
    seen = 0
    while at > 0:
        if raw[at - 1] == 0x65:  # "e"
            return True
        seen += 1
        if seen > _SIGNS_LOOKED_AT:
            return b"e-" in raw or b"0.0000" in raw
        at = raw.find(b"-", at + 1)
    return b"0.0000" in raw


@dataclass(frozen=True, slots=True)
class ResetPlan:
    """Seed-free templates aligned with the environments, and their digest."""

    templates: tuple[dict[str, Any], ...]

    @classmethod
    def from_templates(cls, templates: Sequence[Mapping[str, Any]]) -> ResetPlan:
        return cls(tuple(seed_free_template(t) for t in templates))

    @property
    def sha256(self) -> Sha256Digest:
        return reset_plan_sha256(self.templates)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One planned group: where, with which seed and which exact reset payload."""

    group_index: int
    environment_index: int
    seed: int
    reset_payload: dict[str, Any]
    _digest: Sha256Digest | None = field(init=False, default=None, repr=False, compare=False)

    @property
    def reset_sha256(self) -> Sha256Digest:
        """Computed on first use (where it always was), then kept: once per group rather
        than once per candidate."""
        digest = self._digest
        if digest is None:
            digest = reset_sha256(self.reset_payload)
            object.__setattr__(self, "_digest", digest)
        return digest


def group_plan(
    plan: ResetPlan, groups: int, seed_start: int, *, first: int = 0
) -> Iterator[GroupPlan]:
    """Groups ``first..groups-1`` in order (whole groups rotate round-robin over
    environments).

    ``first`` starts the plan part-way (a shard of a collection split into group ranges):
    group ``g`` is the same wherever the plan starts, seed ``seed_start + g`` and
    environment ``g mod n``, so shards run apart assemble into the groups of one run.
    """
    count = len(plan.templates)
    for index in range(first, groups):
        environment = index % count
        seed = seed_start + index
        yield GroupPlan(
            index, environment, seed, effective_reset_payload(plan.templates[environment], seed)
        )


class RetainedBudget:
    """The single in-memory budget of a collection (§5.6), charged as data arrives.

    Reset payloads, actions, observations, errors and final states are charged their
    compact-JSON size; exhaustion is ``limit_exceeded`` (``MAX_RETAINED_BYTES``) and
    aborts the collection before anything is published.
    """

    def __init__(self, bound: int = MAX_RETAINED_BYTES) -> None:
        self.bound = bound
        self.used = 0

    def charge_bytes(self, size: int, what: str) -> None:
        self.used += size
        if self.used > self.bound:
            raise LimitExceeded(
                f"retained collection data (at {what})",
                limit="MAX_RETAINED_BYTES",
                bound=self.bound,
                observed=self.used,
                hint="collect fewer groups, steps or smaller observations per run",
            )

    def charge(self, *values: Any, what: str) -> None:
        """Charge the compact-JSON size of ``values`` (already-parsed JSON data).

        Sized with the C encoder of :mod:`json` (no key sorting, floats as ``repr``): the
        budget is a memory guard, so a spelling that differs from :mod:`jsonenc` by a
        few characters per float does not matter, and this costs no pure-Python pass.
        """
        size = 0
        for value in values:
            # ``null`` (an absent metadata, say) without a trip through the encoder
            size += 4 if value is None else len(_SIZER.encode(value).encode("utf-8"))
        self.charge_bytes(size, what)

    def charge_parsed(self, *values: Any, what: str) -> None:
        """:meth:`charge` for values the strict JSON parser produced (observations, error
        details, states: what the wire decoder returns), sized the same without the
        ``json`` encoder where :func:`_parsed_size` proves the count."""
        size = 0
        for value in values:
            size += 4 if value is None else _parsed_size(value)
        self.charge_bytes(size, what)
