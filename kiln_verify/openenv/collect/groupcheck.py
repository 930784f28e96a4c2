"""A group's hidden-state check: the state read right after reset, compared across candidates.

Equal reset observations do not prove that a group's candidates play the same game: an
environment may draw a secret (a deck, a target word) from a generator the seed does not
drive, and show it only in its ``state``. Live replay finds that afterwards, as drift of
``final_state``; this check finds it before the group's candidates act. Each candidate of
a group of two or more reads its ``state`` once, on its own session, after reset and
before the first policy call (``state_check``, on by default); the reads are compared
with :func:`kiln_verify.openenv.volatile.compare_states` under the group's effective reset
payload, so a fresh ``episode_id`` per session is not a difference unless that payload
named one. Nothing of it is recorded: the bundle's records are closed and have no place
for it, and a bundle is byte-identical with or without the check.

Why no candidate ever waits for another: a server with fewer session slots than candidates
in flight (OpenEnv's default is one) admits them in any order, so a candidate holding a
slot while it waits for a lower-indexed one could starve it. Instead every arrival is
compared at once, with candidate 0 when it has arrived and otherwise with the first
arrival, and a candidate that arrives after a difference was seen stops (its session is
closed, freeing its slot). The error is raised by the group's last arrival, and it names
the lowest-indexed candidate that differs from candidate 0, however the arrivals
interleaved, with the first differing field path (bounded, no values). Until candidate 0
arrives the earlier arrivals are kept, so at most ``group_size`` states (each at most
``MAX_SERVER_FRAME_BYTES``) are held, and only for the group's lifetime; they are not
charged to the retained-bytes budget, which measures what the bundle keeps.

A state that does not keep the ``episode_id`` the reset payload named is a finding of its
own, found on that candidate's arrival (so the verdict is still independent of the order):
when that candidate is the lowest-indexed one with a finding, the group fails with
``episode_id_ignored``, whose cause is in the payload or the server, not in the game's
seeding. Every refusal names the conformance case that tests its rule (the error class's
``conformance_case``), the case the conformance report's ``collectable`` verdict rests on;
``--no-state-check`` is offered only for a hidden state, where the observation agreed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kiln_verify.errors import EpisodeIdIgnored, KilnError, ResetNondeterministic, snippet
from kiln_verify.openenv.collect.plan import GroupPlan
from kiln_verify.openenv.volatile import compare_states, ignored_identity

__all__ = ["GroupCheck", "SameStart", "different_reset", "state_read_failed"]

#: The path prefix of a reported difference (``state.secret``).
STATE_PATH = "state"


class SameStart(Protocol):
    """A candidate's initial messages and reset observation (the engine's ``_Start``)."""

    def same_as(self, other: Any, /) -> bool: ...


S = TypeVar("S", bound=SameStart)


def _where(plan: GroupPlan, url: str) -> str:
    return (
        f"group {plan.group_index} (environment {plan.environment_index}, {url}, seed {plan.seed})"
    )


def _case(error: type[ResetNondeterministic | EpisodeIdIgnored]) -> str:
    return f"(conformance case {error.conformance_case})"


def different_reset(plan: GroupPlan, url: str, candidate_index: int) -> ResetNondeterministic:
    """Candidate ``candidate_index`` saw other initial messages or another reset
    observation than candidate 0 (the group-integrity rule of contract §5.3)."""
    return ResetNondeterministic(
        f"{_where(plan, url)}: candidate {candidate_index} got a different reset "
        "observation than candidate 0; reset(seed) must be deterministic "
        + _case(ResetNondeterministic)
    )


def _different_state(
    plan: GroupPlan, url: str, candidate_index: int, path: str
) -> ResetNondeterministic:
    # The observation agreed, so collecting without the check is possible, knowingly.
    return ResetNondeterministic(
        f"{_where(plan, url)}: candidate {candidate_index} got the same reset observation as "
        "candidate 0 but a different hidden state (the state read right after reset differs "
        f"first at {snippet(path)}); reset(seed) must be deterministic "
        + _case(ResetNondeterministic),
        hint=(
            "derive every random choice of reset from the seed, the hidden state's too; to "
            "collect anyway, knowing that a group's candidates may then play different hidden "
            "games (live replay reports their final states as drift), turn `state_check` off "
            "(--no-state-check)"
        ),
        fields=("state_check",),
    )


def _ignored_identity(
    plan: GroupPlan, url: str, candidate_index: int, name: str
) -> EpisodeIdIgnored:
    # --no-state-check is no escape here: the bundle would record final states that
    # contradict its own reset payload, and every replay would refuse them.
    return EpisodeIdIgnored(
        f"{_where(plan, url)}: candidate {candidate_index}: the reset payload named {name} "
        f"{snippet(plan.reset_payload[name])} but the state read right after reset reports "
        f"another; the server ignores a requested {name} " + _case(EpisodeIdIgnored),
        drift={
            "stage": "state",
            "environment_index": plan.environment_index,
            "group_index": plan.group_index,
            "candidate_index": candidate_index,
            "field": f"{STATE_PATH}.{name}",
        },
        hint=(
            f"the server does not keep the {name} a reset names (OpenEnv's reset(seed, "
            f"episode_id) should store it in State.{name}): fix the environment, or leave "
            f"{name} out of `reset_templates`, so that each session's own id is session "
            "identity, compared by presence and JSON type only"
        ),
        fields=("reset_templates",),
    )


def state_read_failed(exc: KilnError, plan: GroupPlan, url: str, candidate_index: int) -> KilnError:
    """``exc`` (the client's own error, code unchanged) said to come from the check's read.

    The session's request timeout, transport and poisoning rules apply to this read as to
    any other, and an error reply fails it like a ``final_state`` read would; the hint
    names the control that skips the read for servers that cannot or should not answer.
    """
    exc.rule = (
        f"{_where(plan, url)}: candidate {candidate_index}: the state read right after reset "
        f"(the group's hidden-state check) failed: {exc.rule}"
    )
    skip = (
        "if the environment cannot answer state right after reset, or answering is "
        "expensive, turn `state_check` off (--no-state-check)"
    )
    exc.hint = f"{exc.hint}; {skip}" if exc.hint else skip
    exc.fields = (*exc.fields, "state_check")
    exc.args = (exc.rule,)
    return exc


@dataclass(frozen=True, slots=True)
class _Arrival(Generic[S]):
    start: S
    state: Any


class GroupCheck(Generic[S]):
    """One group's comparison of its candidates' starts and post-reset states.

    :meth:`arrive` is called once per candidate, after reset and the state read, before
    its first policy call; ``False`` tells the candidate to stop without acting.
    """

    __slots__ = (
        "_arrived",
        "_differences",
        "_ignored",
        "_pending",
        "_zero",
        "failed",
        "plan",
        "size",
        "url",
    )

    def __init__(self, plan: GroupPlan, size: int, url: str) -> None:
        self.plan = plan
        self.size = size
        self.url = url
        self.failed = False
        self._arrived = 0
        self._zero: _Arrival[S] | None = None
        # arrivals before candidate 0, by candidate index (kept until it arrives)
        self._pending: dict[int, _Arrival[S]] = {}
        # candidate index -> "" (another observation) or the first differing state path
        self._differences: dict[int, str] = {}
        # candidate index -> the identity field its state did not keep (episode_id)
        self._ignored: dict[int, str] = {}

    def _difference(self, expected: _Arrival[S], actual: _Arrival[S]) -> str | None:
        """``None`` when equal, ``""`` for another start, else the state's differing path."""
        if not expected.start.same_as(actual.start):
            return ""
        found = compare_states(
            expected.state, actual.state, reset_payload=self.plan.reset_payload, path=STATE_PATH
        ).difference
        return None if found is None else found.path

    def _judge(self, index: int, arrival: _Arrival[S]) -> None:
        assert self._zero is not None
        found = self._difference(self._zero, arrival)
        if found is not None:
            self._differences[index] = found
            self.failed = True

    def arrive(self, index: int, start: S, state: Any) -> bool:
        """Record candidate ``index``; whether it may act. The last arrival of a group with
        a difference raises ``reset_nondeterministic`` or ``episode_id_ignored`` instead."""
        arrival = _Arrival(start, state)
        ignored = ignored_identity(self.plan.reset_payload, state)
        if ignored is not None:
            self._ignored[index] = ignored
            self.failed = True
        if index == 0:
            self._zero = arrival
            for other, pending in self._pending.items():
                self._judge(other, pending)
            self._pending.clear()
        elif self._zero is not None:
            self._judge(index, arrival)
        else:
            if self._pending and not self.failed:
                first = next(iter(self._pending.values()))
                self.failed = self._difference(first, arrival) is not None
            self._pending[index] = arrival
        self._arrived += 1
        if self._arrived == self.size:
            self._zero = None
            if self.failed:
                raise self._verdict()
        return not self.failed

    def _verdict(self) -> ResetNondeterministic | EpisodeIdIgnored:
        """The lowest-indexed candidate with a finding: another observation, else a requested
        identity its state did not keep (which also explains a differing state), else a
        hidden state. A difference between two arrivals is a difference of one of them
        from candidate 0."""
        index = min(self._differences.keys() | self._ignored.keys())
        path = self._differences.get(index)
        if path == "":
            return different_reset(self.plan, self.url, index)
        if index in self._ignored:
            return _ignored_identity(self.plan, self.url, index, self._ignored[index])
        assert path is not None
        return _different_state(self.plan, self.url, index, path)
