"""Summary ↔ replay cross-checks, reset plan and group plan (kiln-openenv-contract §6.6-§6.8).

All of these need only the two documents that are parsed whole; the per-line checks of the
streamed corpus live in :mod:`kiln_verify.openenv.verify.candidates`.
"""

from __future__ import annotations

from typing import Any

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.errors import (
    BundleDatasetDigestMismatch,
    BundleGroupPlanMismatch,
    BundleHeaderMismatch,
    BundleMessagesMismatch,
    BundleResetPlanMismatch,
)
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.prompt import initial_messages
from kiln_verify.openenv.records.replay import ReplayGroup, ReplayManifest
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.serialize import reset_plan_sha256, seed_free_template
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.openenv.verify.replay_checks import where
from kiln_verify.records import bits_equal

__all__ = [
    "ResetPlan",
    "check_counts",
    "check_group_plan",
    "check_group_plan_one",
    "check_header",
    "check_messages",
    "check_replay_header",
    "check_reset_plan",
]


def _same_json(left: Any, right: Any) -> bool:
    """Deep JSON equality with type fidelity (``1`` ≠ ``1.0`` ≠ ``true``)."""
    return dumps_canonical(left) == dumps_canonical(right)


def check_header(summary: RolloutSummary, replay: ReplayManifest, *, replay_shown: str) -> None:
    """§6.6: dataset digest link, environments, max_steps, penalty, counts."""
    check_replay_header(summary, replay, replay_shown=replay_shown)
    check_counts(
        summary,
        groups=len(replay.groups),
        rollouts=len(summary.rollouts),
        replay_shown=replay_shown,
    )


def _header_fail(rule: str, replay_shown: str) -> BundleHeaderMismatch:
    return BundleHeaderMismatch(rule + " (§6.6)", path=replay_shown, location="header")


def check_replay_header(
    summary: RolloutSummary, replay: ReplayManifest, *, replay_shown: str
) -> None:
    """§6.6 without the counts: dataset digest link, environments, max_steps, penalty."""
    if replay.dataset_sha256 != summary.dataset_sha256:
        raise BundleDatasetDigestMismatch(
            "the replay's dataset_sha256 differs from the summary's (§6.6)",
            path=replay_shown,
            location="header",
        )
    summary_envs = [inspection.to_json() for inspection in summary.environments]
    replay_envs = [inspection.to_json() for inspection in replay.environments]
    if not _same_json(summary_envs, replay_envs):
        raise _header_fail("the replay's environments differ from the summary's", replay_shown)
    if replay.max_steps != summary.max_steps:
        raise _header_fail(
            f"max_steps {replay.max_steps} differs from the summary's {summary.max_steps}",
            replay_shown,
        )
    if not bits_equal(replay.protocol_error_reward, summary.protocol_error_reward):
        raise _header_fail(
            "protocol_error_reward differs bit-wise from the summary's", replay_shown
        )


def check_counts(
    summary: RolloutSummary, *, groups: int | None, rollouts: int, replay_shown: str
) -> None:
    """§6.6 counts: replay groups (``None``: not known yet) and rollout records."""
    if groups is not None and groups != summary.groups:
        raise _header_fail(
            f"{groups} replay groups, the summary says {summary.groups}", replay_shown
        )
    expected = summary.groups * summary.group_size
    if summary.rollout_count != expected or rollouts != expected:
        raise _header_fail(
            f"groups * group_size = {expected}, rollout_count = {summary.rollout_count}, "
            f"{rollouts} rollout records",
            replay_shown,
        )


class ResetPlan:
    """§6.7 (v3+), one group at a time: per-environment seed-free reset templates."""

    def __init__(self, environments: int, *, replay_shown: str) -> None:
        self._templates: list[dict[str, Any] | None] = [None] * environments
        self._canonical: list[bytes | None] = [None] * environments
        self._shown = replay_shown

    def add(self, group: ReplayGroup) -> None:
        template = seed_free_template(group.reset_payload)
        index = group.environment_index
        canonical = dumps_canonical(template)
        known = self._canonical[index]
        if known is None:
            self._templates[index] = template
            self._canonical[index] = canonical
        elif known != canonical:
            raise BundleResetPlanMismatch(
                "reset template differs from an earlier group of the same environment (§6.7)",
                path=self._shown,
                location=where(group.group_index),
            )

    def check(self, reset_plan: str) -> None:
        """Every environment used, and the templates hash to ``reset_plan``."""
        plan: list[dict[str, Any]] = []
        for index, recovered in enumerate(self._templates):
            if recovered is None:
                raise BundleResetPlanMismatch(
                    f"environment {index} is never used by any group (§6.7)",
                    path=self._shown,
                    location=f"environment {index}",
                )
            plan.append(recovered)
        if str(reset_plan_sha256(plan)) != reset_plan:
            raise BundleResetPlanMismatch(
                "the reconstructed reset templates do not hash to reset_plan_sha256 (§6.7)",
                path=self._shown,
                location="reset plan",
            )


def check_reset_plan(summary: RolloutSummary, replay: ReplayManifest, *, replay_shown: str) -> None:
    """§6.7 (v3+): per-environment seed-free templates hash to ``reset_plan_sha256``."""
    if summary.reset_plan_sha256 is None:  # v2: the reset-options digest is not rebuilt
        return
    plan = ResetPlan(len(replay.environments), replay_shown=replay_shown)
    for group in replay.groups:
        plan.add(group)
    plan.check(summary.reset_plan_sha256)


def check_group_plan(summary: RolloutSummary, replay: ReplayManifest, *, replay_shown: str) -> None:
    """§6.8 without the corpus: group size, seed, environment rotation, reset seed."""
    for group in replay.groups:
        check_group_plan_one(summary, group, len(replay.environments), replay_shown=replay_shown)


def check_group_plan_one(
    summary: RolloutSummary, group: ReplayGroup, environments: int, *, replay_shown: str
) -> None:
    """§6.8 without the corpus, for one group."""
    g = group.group_index

    def fail(rule: str) -> BundleGroupPlanMismatch:
        return BundleGroupPlanMismatch(rule + " (§6.8)", path=replay_shown, location=where(g))

    if len(group.candidates) != summary.group_size:
        raise fail(f"{len(group.candidates)} candidates, group_size is {summary.group_size}")
    if group.seed != summary.seed_start + g:
        raise fail(f"seed {group.seed} is not seed_start + group_index")
    if group.environment_index != g % environments:
        raise fail(f"environment_index {group.environment_index} is not group_index mod n")
    seed = group.reset_payload.get("seed")
    if type(seed) is not int or seed != group.seed:
        raise fail("reset_payload.seed differs from the group seed")


def check_messages(
    line: AgenticGroup,
    group: ReplayGroup,
    inspection: EnvironmentInspection,
    *,
    dataset_shown: str,
    line_number: int,
    system: str | None = None,
) -> None:
    """§6.8: the line's prompt equals the recomputed initial messages, byte for byte.

    ``system``: the environment's system prompt, if the caller computed it once.
    """
    messages = initial_messages(inspection, group.reset_observation, system=system, parsed=True)
    expected = [message.to_json() for message in messages]
    found = [message.to_json() for message in line.messages]
    if expected != found:
        raise BundleMessagesMismatch(
            "messages differ from the initial messages recomputed from the environment "
            "inspection and the reset observation (§6.8)",
            path=dataset_shown,
            line=line_number,
            location=where(group.group_index),
        )
