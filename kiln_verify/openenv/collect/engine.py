"""What a collection is made of, and the two rules that make it one.

The records the steps (:mod:`.steps`) pass along: :class:`ProgressEvent`,
:class:`CollectedGroup` (one finished group) and :class:`Collection` (everything the three
files are built from). The two rules every assembler applies, whoever ran the episodes
(the collector's steps, the TRL recorder): **group integrity**, every candidate of a group
produced byte-identical initial messages and reset observation
(``reset_nondeterministic`` otherwise; :func:`first_different` finds the first that did
not, with candidate 0's digests computed once), and **revalidation**, every environment
inspected again after the last group equals its first inspection
(:func:`check_unchanged`; ``environment_identity_changed`` names the fields). They live
here, once, so that nothing that assembles a collection re-implements either.

With ``state_check`` (the default) the candidates of a group also read the same state
right after reset, volatile identity fields aside; :mod:`.groupcheck` compares them as the
candidates arrive, before they act, through :func:`arrival`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from kiln_verify.errors import EnvironmentIdentityChanged
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.episode import Arrival, EpisodeResult
from kiln_verify.openenv.collect.groupcheck import GroupCheck, different_reset
from kiln_verify.openenv.collect.plan import GroupPlan, ResetPlan
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.protocol.client import Inspection
from kiln_verify.openenv.protocol.identity import EnvironmentIdentity, compare_identities
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
    "Reinspection",
    "arrival",
    "behavior_identity",
    "check_integrity",
    "check_unchanged",
    "first_different",
    "gather_or_cancel",
    "inspection_record",
    "same_start",
]

Reinspection = tuple[EnvironmentIdentity, dict[str, Any]]
"""An environment inspected again: its identity and its advertised schema."""

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
    """One finished group: its plan, the shared prompt, candidate 0's reset observation.

    ``checked`` is set (by :meth:`checked_group`) only on a group whose integrity was
    checked as it ended, so an assembler need not compare its starts a second time; it is
    not an ``__init__`` argument, and ``dataclasses.replace`` starts a copy unchecked.
    """

    plan: GroupPlan
    messages: list[ChatMessage]
    reset_observation: ObservationRecord
    episodes: list[EpisodeResult]
    checked: bool = field(init=False, default=False, repr=False, compare=False)

    @classmethod
    def checked_group(cls, plan: GroupPlan, episodes: list[EpisodeResult]) -> CollectedGroup:
        """A group whose candidates were just found to start alike (integrity checked)."""
        group = cls(plan, episodes[0].messages, episodes[0].reset_observation, episodes)
        object.__setattr__(group, "checked", True)
        return group


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


async def gather_or_cancel(awaitables: Sequence[Awaitable[T]]) -> list[T]:
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


def first_different(episodes: Sequence[EpisodeResult]) -> int | None:
    """The candidate index of the first episode whose start differs from candidate 0's
    (the group-integrity rule), or ``None`` when the whole group started alike."""
    first = episodes[0]
    reference = _Start(first.messages, first.reset_observation)
    for episode in episodes[1:]:
        if not reference.same_as(_Start(episode.messages, episode.reset_observation)):
            return episode.candidate_index
    return None


def check_integrity(plan: GroupPlan, episodes: Sequence[EpisodeResult], url: str) -> None:
    """:func:`first_different` as the collector's refusal (``reset_nondeterministic``)."""
    different = first_different(episodes)
    if different is not None:
        raise different_reset(plan, url, different)


_check_integrity = check_integrity  # its name in tests written before it was public


def check_unchanged(
    before: Sequence[Reinspection], after: Sequence[Reinspection], *, during: str = "collection"
) -> None:
    """Revalidation: every environment's identity and schema now (``after``) equal what
    they were when the collection started (``before``), or ``environment_identity_changed``
    naming each environment and the fields that moved (nothing may be published)."""
    problems: list[str] = []
    for index, ((identity, schema), (again, again_schema)) in enumerate(
        zip(before, after, strict=True)
    ):
        changed = compare_identities(
            identity, again, expected_schema=schema, actual_schema=again_schema
        )
        if changed:
            problems.append(f"environment {index} ({identity.base_url}): {', '.join(changed)}")
    if problems:
        raise EnvironmentIdentityChanged(
            f"environment identity changed during {during}; nothing was published: "
            + "; ".join(problems),
            hint="pin the environment deployment and collect again",
        )


def arrival(check: GroupCheck[_Start]) -> Arrival:
    """What a candidate calls once it has its start and its state read right after reset."""

    def arrive(
        index: int, messages: list[ChatMessage], reset: ObservationRecord, state: Any
    ) -> bool:
        return check.arrive(index, _Start(messages, reset), state)

    return arrive
