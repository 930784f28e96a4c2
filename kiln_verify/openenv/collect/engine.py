"""Collection orchestration: discovery, groups, group integrity, revalidation.

``discovering``: every environment is inspected concurrently (health, the four discovery
documents, the compiled action schema). ``collecting``: groups run one at a time in plan
order; a group's candidates run concurrently, at most ``min(concurrency, group_size)`` in
flight, and results are kept in candidate order. Every candidate of a group must have
produced byte-identical initial messages and reset observation and, with ``state_check``
(the default), read the same state right after reset, volatile identity fields aside
(``reset_nondeterministic`` otherwise; :mod:`collect.groupcheck` compares them before the
candidates act). ``revalidating``: after the last group every environment is inspected again
and must equal its first inspection (``environment_identity_changed`` names the fields).
Any failure aborts with nothing to publish; :func:`collect` returns only complete data.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from kiln_verify.errors import EnvironmentIdentityChanged
from kiln_verify.openenv.client import Inspection, OpenEnvClient
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.episode import (
    Arrival,
    EnvironmentContext,
    EpisodeResult,
    run_episode,
)
from kiln_verify.openenv.collect.groupcheck import GroupCheck, different_reset
from kiln_verify.openenv.collect.plan import GroupPlan, ResetPlan, RetainedBudget, group_plan
from kiln_verify.openenv.identity import compare_identities
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.records.environment import (
    EnvironmentIdentityRecord,
    EnvironmentInspection,
    EnvironmentSchema,
)
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.serialize import messages_sha256, reset_observation_sha256
from kiln_verify.records import BehaviorPolicyIdentity, ChatMessage, validate_record

__all__ = [
    "CollectedGroup",
    "Collection",
    "ProgressEvent",
    "ProgressHook",
    "behavior_identity",
    "collect",
    "inspection_record",
]

T = TypeVar("T")
Stage = Literal[
    "discovering", "collecting", "revalidating", "episode", "group", "publishing", "published"
]


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """``stage`` plus, for ``episode``/``group``, how many of ``total`` are finished."""

    stage: Stage
    completed: int = 0
    total: int = 0


ProgressHook = Callable[[ProgressEvent], None]


@dataclass(frozen=True, slots=True)
class CollectedGroup:
    """One finished group: its plan, the shared prompt, candidate 0's reset observation."""

    plan: GroupPlan
    messages: list[ChatMessage]
    reset_observation: ObservationRecord
    episodes: list[EpisodeResult]


@dataclass(frozen=True, slots=True, repr=False)
class Collection:
    """A complete, revalidated collection: everything the three files are built from.

    The repr is deliberately short: Python 3.11's ``asyncio.run`` formats the repr of the
    main task (and so of its result) when it restores the SIGINT handler, and a full
    repr of every record would cost more than the collection's own bookkeeping.
    """

    controls: CollectionControls
    reset_plan: ResetPlan
    environments: list[EnvironmentInspection]
    behavior: BehaviorPolicyIdentity
    groups: list[CollectedGroup]

    def __repr__(self) -> str:
        return f"Collection(groups={len(self.groups)}, environments={len(self.environments)})"


def inspection_record(inspection: Inspection) -> EnvironmentInspection:
    """The recorded form of a live inspection (identity + raw action/observation/state)."""
    schema = inspection.environment_schema
    return EnvironmentInspection(
        identity=EnvironmentIdentityRecord.from_identity(inspection.identity),
        schema=EnvironmentSchema(
            action=schema.get("action"),
            observation=schema.get("observation"),
            state=schema.get("state"),
        ),
    )


def behavior_identity(policy: Policy) -> BehaviorPolicyIdentity:
    """The policy's identity as ``RolloutBehaviorPolicyIdentityV1`` (docs/contract.md)."""
    return validate_record(BehaviorPolicyIdentity, policy.identity().rollout_identity())


async def _gather_or_cancel(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """All results in order; the first failure cancels the rest (and waits for them)."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _message_texts(messages: list[ChatMessage]) -> list[tuple[str, str, str | None, str | None]]:
    """The members of messages without ``tool_calls`` (the collector writes none): equal
    lists of these are equal compact JSON, i.e. equal ``messages_sha256`` preimages."""
    return [(m.role, m.content, m.name, m.tool_call_id) for m in messages]


def _prompt_carries_observation(messages: list[ChatMessage], reset: ObservationRecord) -> bool:
    """Whether the user message embeds the reset observation's compact JSON verbatim
    (:func:`observation_content` without a usable ``input_text``), so that equal messages
    already prove equal ``reset_observation_sha256`` preimages."""
    payload = reset.observation
    if isinstance(payload, dict):
        text = payload.get("input_text")
        if isinstance(text, str) and text.strip():
            return False
    return len(messages) == 2 and all(m.tool_calls is None for m in messages)


class _Start:
    """One candidate's initial messages and reset observation, with the digests group
    integrity may need computed at most once (candidate 0 is compared with every other
    candidate of its group, so its digests were the ones computed repeatedly)."""

    __slots__ = ("_messages_sha256", "_reset_sha256", "carries", "messages", "plain", "reset")

    def __init__(self, messages: list[ChatMessage], reset: ObservationRecord) -> None:
        self.messages = messages
        self.reset = reset
        self.carries = _prompt_carries_observation(messages, reset)
        # Without tool_calls, messages are equal compact JSON exactly when their members
        # are equal strings (or both absent), as _message_texts compares them.
        self.plain = all(m.tool_calls is None for m in messages)
        self._messages_sha256: str | None = None
        self._reset_sha256: str | None = None

    def messages_sha256(self) -> str:
        if self._messages_sha256 is None:
            self._messages_sha256 = str(messages_sha256(self.messages))
        return self._messages_sha256

    def reset_sha256(self) -> str:
        if self._reset_sha256 is None:
            self._reset_sha256 = str(reset_observation_sha256(self.reset))
        return self._reset_sha256

    def same_as(self, other: _Start) -> bool:
        """Byte-identical initial messages and reset observation (see :func:`same_start`)."""
        if self.carries and other.carries:
            return _message_texts(self.messages) == _message_texts(other.messages)
        if self.plain and other.plain:
            same_messages = _message_texts(self.messages) == _message_texts(other.messages)
        else:
            same_messages = self.messages_sha256() == other.messages_sha256()
        # Same order and short-circuit as before: the reset digests only when the
        # messages agree.
        return same_messages and self.reset_sha256() == other.reset_sha256()


def same_start(
    messages: list[ChatMessage],
    reset: ObservationRecord,
    other_messages: list[ChatMessage],
    other_reset: ObservationRecord,
) -> bool:
    """Byte-identical initial messages and reset observation (the group-integrity rule),
    for messages that :func:`initial_messages` built from their reset observation.

    The common case needs no serialization at all: the messages are compared member by
    member (strings, which compare exactly as their bytes), and the user message already
    contains the reset observation's compact JSON. Anything else is compared through the
    two digests (``messages_sha256``, ``reset_observation_sha256``).
    """
    return _Start(messages, reset).same_as(_Start(other_messages, other_reset))


def _check_integrity(plan: GroupPlan, episodes: list[EpisodeResult], url: str) -> None:
    first = episodes[0]
    reference = _Start(first.messages, first.reset_observation)
    for episode in episodes[1:]:
        if not reference.same_as(_Start(episode.messages, episode.reset_observation)):
            raise different_reset(plan, url, episode.candidate_index)


def _arrival(check: GroupCheck[_Start]) -> Arrival:
    """What a candidate calls once it has its start and its state read right after reset."""

    def arrive(
        index: int, messages: list[ChatMessage], reset: ObservationRecord, state: Any
    ) -> bool:
        return check.arrive(index, _Start(messages, reset), state)

    return arrive


async def collect(
    controls: CollectionControls,
    policy: Policy,
    *,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
    budget: RetainedBudget | None = None,
) -> Collection:
    """Run the whole collection; raises a typed error and returns nothing on any failure."""
    notify = progress or (lambda event: None)
    budget = budget or RetainedBudget()
    reset_plan = ResetPlan.from_templates(controls.reset_templates)
    for template in reset_plan.templates:
        budget.charge(template, what="a reset template")
    behavior = behavior_identity(policy)
    async with contextlib.AsyncExitStack() as stack:
        clients: list[OpenEnvClient] = []
        for index, url in enumerate(controls.environments):
            slot = controls.credential_envs[index] if controls.credential_envs else None
            client = OpenEnvClient(url, credential_env=slot, environ=environ)
            await stack.enter_async_context(client)
            clients.append(client)
        notify(ProgressEvent("discovering"))
        first = await _gather_or_cancel([client.inspect() for client in clients])
        contexts = [
            EnvironmentContext(index, client, inspection_record(found), found.action_schema)
            for index, (client, found) in enumerate(zip(clients, first, strict=True))
        ]
        notify(ProgressEvent("collecting", 0, controls.options.groups))
        semaphore = asyncio.Semaphore(controls.options.in_flight)
        groups: list[CollectedGroup] = []
        finished = 0

        async def candidate(
            env: EnvironmentContext, plan: GroupPlan, index: int, arrival: Arrival | None
        ) -> EpisodeResult | None:
            nonlocal finished
            async with semaphore:
                result = await run_episode(
                    env,
                    plan,
                    index,
                    controls=controls,
                    policy=policy,
                    behavior=behavior,
                    budget=budget,
                    arrival=arrival,
                )
            if result is not None:
                finished += 1
                notify(ProgressEvent("episode", finished, controls.options.rollout_count))
            return result

        # A group of one has nothing to compare its state with.
        checked = controls.options.state_check and controls.options.group_size > 1
        for plan in group_plan(reset_plan, controls.options.groups, controls.options.seed_start):
            env = contexts[plan.environment_index]
            url = env.inspection.identity.base_url
            budget.charge(plan.reset_payload, what="a reset payload")
            arrival = (
                _arrival(GroupCheck(plan, controls.options.group_size, url)) if checked else None
            )
            results = await _gather_or_cancel(
                [
                    candidate(env, plan, index, arrival)
                    for index in range(controls.options.group_size)
                ]
            )
            # A candidate stops (None) only in a failing group, whose last arrival raised.
            episodes = [result for result in results if result is not None]
            if len(episodes) != len(results):
                raise AssertionError("a group's check stopped a candidate but did not fail")
            if arrival is None:
                _check_integrity(plan, episodes, url)
            groups.append(
                CollectedGroup(plan, episodes[0].messages, episodes[0].reset_observation, episodes)
            )
            notify(ProgressEvent("group", len(groups), controls.options.groups))
        notify(ProgressEvent("revalidating"))
        again = await _gather_or_cancel([client.inspect() for client in clients])
        problems: list[str] = []
        for index, (before, after) in enumerate(zip(first, again, strict=True)):
            changed = compare_identities(
                before.identity,
                after.identity,
                expected_schema=before.environment_schema,
                actual_schema=after.environment_schema,
            )
            if changed:
                problems.append(
                    f"environment {index} ({before.identity.base_url}): {', '.join(changed)}"
                )
        if problems:
            raise EnvironmentIdentityChanged(
                "environment identity changed during collection; nothing was published: "
                + "; ".join(problems),
                hint="pin the environment deployment and collect again",
            )
    return Collection(controls, reset_plan, [c.inspection for c in contexts], behavior, groups)
