"""Pairing checks between a baseline and a candidate bundle (kiln-openenv-contract §9 step 3).

Both sides must come from identical collection options against unchanged environments:

1. the same discovered environments (identity and schemas, byte-equal compact JSON, in
   ``--environment`` order);
2. the same collection options (:data:`PAIRED_OPTIONS`: groups, group size, seed start,
   steps, tokens, thinking, temperature, penalty, budgets, concurrency, capacity wait and
   the reset plan digest) — floats compared bit for bit;
3. per group, in order: the same group index, environment index, seed, effective reset
   payload, reset observation (compact JSON, so an integer reward ``1`` differs from
   ``1.0``) and candidate indices.

The first difference raises :class:`~kiln_verify.errors.EvaluationPairingMismatch` naming
the group (``location``) and the field; values are never echoed beyond a short snippet.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kiln_verify.core.jsonio import dumps_compact
from kiln_verify.errors import EvaluationPairingMismatch, snippet
from kiln_verify.openenv.records.replay import ReplayManifest
from kiln_verify.openenv.records.serialize import reset_observation_sha256, reset_sha256
from kiln_verify.openenv.records.summary import RolloutSummary

__all__ = ["PAIRED_OPTIONS", "PairedBundle", "check_pairing"]

PAIRED_OPTIONS: Final = (
    "groups",
    "group_size",
    "rollout_count",
    "seed_start",
    "max_steps",
    "concurrency",
    "max_action_tokens",
    "thinking_budget_tokens",
    "temperature",
    "thinking",
    "protocol_error_reward",
    "max_recoverable_errors",
    "capacity_wait_seconds",
    "reset_plan_sha256",
)
"""Summary fields that must be equal on both sides (every collection option that is not a
path or the policy)."""

_F64 = struct.Struct(">d")


@dataclass(frozen=True, slots=True)
class PairedBundle:
    """One verified side: its parsed summary and replay, the summary file digest and path."""

    summary: RolloutSummary
    replay: ReplayManifest
    summary_sha256: str
    summary_path: str


def _same(left: object, right: object) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        return _F64.pack(left) == _F64.pack(right)
    return type(left) is type(right) and left == right


def _fail(rule: str, *, location: str, path: str) -> EvaluationPairingMismatch:
    return EvaluationPairingMismatch(rule, location=location, path=path)


def check_pairing(baseline: PairedBundle, candidate: PairedBundle) -> None:
    """Raise :class:`EvaluationPairingMismatch` at the first difference; return if paired."""
    shown = candidate.summary_path
    base_s, cand_s = baseline.summary, candidate.summary
    for name in PAIRED_OPTIONS:
        left, right = getattr(base_s, name), getattr(cand_s, name)
        if not _same(left, right):
            raise _fail(
                f"option {name} differs: baseline {snippet(left)}, candidate {snippet(right)}",
                location="options",
                path=shown,
            )
    base_r, cand_r = baseline.replay, candidate.replay
    if len(base_r.environments) != len(cand_r.environments):
        raise _fail(
            f"{len(base_r.environments)} baseline environments, "
            f"{len(cand_r.environments)} candidate environments",
            location="environments",
            path=shown,
        )
    for index, (left_env, right_env) in enumerate(
        zip(base_r.environments, cand_r.environments, strict=True)
    ):
        if dumps_compact(left_env.identity.to_json()) != dumps_compact(
            right_env.identity.to_json()
        ):
            raise _fail(
                "the environment identity differs", location=f"environment {index}", path=shown
            )
        if dumps_compact(left_env.schema_.to_json()) != dumps_compact(right_env.schema_.to_json()):
            raise _fail(
                "the environment schemas differ", location=f"environment {index}", path=shown
            )
    if len(base_r.groups) != len(cand_r.groups):
        raise _fail(
            f"{len(base_r.groups)} baseline groups, {len(cand_r.groups)} candidate groups",
            location="groups",
            path=shown,
        )
    for position, (left, right) in enumerate(zip(base_r.groups, cand_r.groups, strict=True)):
        where = f"group {position}"
        for name in ("group_index", "environment_index", "seed"):
            lv, rv = getattr(left, name), getattr(right, name)
            if lv != rv:
                raise _fail(
                    f"{name} differs: baseline {lv}, candidate {rv}", location=where, path=shown
                )
        if reset_sha256(left.reset_payload) != reset_sha256(right.reset_payload):
            raise _fail("the effective reset payload differs", location=where, path=shown)
        if reset_observation_sha256(left.reset_observation) != reset_observation_sha256(
            right.reset_observation
        ):
            raise _fail("the reset observation differs", location=where, path=shown)
        left_idx = [c.candidate_index for c in left.candidates]
        right_idx = [c.candidate_index for c in right.candidates]
        if left_idx != right_idx:
            raise _fail(
                f"candidate indices differ: baseline {snippet(left_idx)}, "
                f"candidate {snippet(right_idx)}",
                location=where,
                path=shown,
            )
