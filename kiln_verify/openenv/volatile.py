"""Which ``State`` fields are per-session identity, and how to compare states that carry them.

OpenEnv's ``State`` contract has exactly one per-session identifier: ``episode_id``
(``step_count`` is episode progress, everything else is environment state). OpenEnv's own
template (``openenv init``) and most real environments give it a fresh ``uuid4()`` on
every reset unless the reset payload names one, so two sessions that play the same game
with the same seed still disagree there. An exact comparison would report that as drift
and no re-collection could ever cure it.

The rule, used by live replay, by the collector's group check and by the conformance
suite's determinism case:

- a field of :data:`VOLATILE_STATE_FIELDS` is *volatile* when the effective reset payload
  did not set it (the key is absent or ``null``); a volatile field is compared by
  presence and JSON type only, never by value;
- when the payload sets it (``{"episode_id": "run-7"}``), the server was told what to
  store, and the field is compared exactly like every other field;
- ``strict=True`` turns the rule off: everything is compared exactly.

A field the payload set and the server did not keep is a cause of its own, not drift
(:func:`ignored_identity`; ``episode_id_ignored`` in rollout and replay alike): the fix is
in the reset payload or the server, never in the game's seeding.

What it cannot detect: an environment that *should* have echoed a caller's episode id but
invents its own is still caught (the payload set it, so it is exact), but an environment
whose ``episode_id`` leaks hidden per-episode state (say, the seed of a game it did not
derive from the reset ``seed``) is indistinguishable from a uuid and passes.

The comparison itself is :func:`kiln_verify.openenv.jsondiff.first_difference`
(type-strict at every depth: ``1``, ``1.0`` and ``true`` differ); this module only masks
the volatile fields before it runs, so both share one definition of "equal".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kiln_verify.openenv.jsondiff import Difference, VolatileValue, first_difference, json_type

__all__ = [
    "VOLATILE_STATE_FIELDS",
    "StateComparison",
    "VolatileValue",
    "compare_states",
    "ignored_identity",
    "json_type",
    "mask_volatile",
    "volatile_state_fields",
]

#: The OpenEnv ``State`` fields that identify a session rather than describe a game.
VOLATILE_STATE_FIELDS: Final[tuple[str, ...]] = ("episode_id",)


def _payload_sets(reset_payload: Mapping[str, Any] | None, name: str) -> bool:
    return reset_payload is not None and reset_payload.get(name) is not None


def volatile_state_fields(
    reset_payload: Mapping[str, Any] | None,
    state: Any = None,
    *,
    strict: bool = False,
) -> tuple[str, ...]:
    """The identity fields that ``reset_payload`` did not set, in contract order.

    With ``state`` (a parsed state object), only the fields that state carries are
    returned, which is what a report lists; without it, every field the rule would mask.
    ``strict=True`` always returns ``()``.
    """
    if strict:
        return ()
    fields = tuple(name for name in VOLATILE_STATE_FIELDS if not _payload_sets(reset_payload, name))
    if state is None:
        return fields
    if not isinstance(state, dict):
        return ()
    return tuple(name for name in fields if name in state)


def ignored_identity(reset_payload: Mapping[str, Any] | None, state: Any) -> str | None:
    """The first identity field ``reset_payload`` set that ``state`` reports otherwise.

    ``None`` when the payload set none, when the state is not an object or does not carry
    the field (nothing contradicts the request), or when it holds exactly the requested
    value (type-strict, as every comparison here: ``"7"`` is not ``7``).
    """
    if reset_payload is None or not isinstance(state, dict):
        return None
    for name in VOLATILE_STATE_FIELDS:
        if not _payload_sets(reset_payload, name) or name not in state:
            continue
        requested, reported = reset_payload[name], state[name]
        if json_type(requested) != json_type(reported) or requested != reported:
            return name
    return None


def mask_volatile(state: Any, fields: tuple[str, ...]) -> Any:
    """A shallow copy of ``state`` whose ``fields`` hold :class:`VolatileValue` markers.

    Absent fields stay absent (presence is still compared); a non-object ``state`` is
    returned unchanged.
    """
    if not isinstance(state, dict) or not fields:
        return state
    masked = dict(state)
    for name in fields:
        if name in masked:
            masked[name] = VolatileValue(json_type(masked[name]))
    return masked


@dataclass(frozen=True, slots=True)
class StateComparison:
    """The result of :func:`compare_states`.

    ``volatile`` lists the fields compared by presence and type only (those present on
    either side); ``difference`` is the first type-strict difference, ``None`` if equal.
    """

    volatile: tuple[str, ...]
    difference: Difference | None

    @property
    def equal(self) -> bool:
        return self.difference is None


def compare_states(
    expected: Any,
    actual: Any,
    *,
    reset_payload: Mapping[str, Any] | None,
    strict: bool = False,
    path: str = "state",
) -> StateComparison:
    """Compare two parsed states under the volatile-identity rule.

    ``reset_payload`` is the effective payload of the reset both states followed (the
    same for both sides: a recorded reset and its replay, or two candidates of a group).
    ``path`` prefixes the reported difference (``final_state.episode_id``, say).
    """
    fields = volatile_state_fields(reset_payload, strict=strict)
    present = tuple(
        name
        for name in fields
        if (isinstance(expected, dict) and name in expected)
        or (isinstance(actual, dict) and name in actual)
    )
    difference = first_difference(
        mask_volatile(expected, present), mask_volatile(actual, present), path
    )
    return StateComparison(present, difference)
