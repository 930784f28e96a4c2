"""The per-step records of an episode, built without re-running validation that cannot fail.

Every step of an episode builds five small records (the observation record, its replay
result and exchange, the action and observation turn segments). Their validators only
pass values through for what the collector hands them -- a wire observation (the free
JSON fields accept anything and keep it, a :class:`~kiln_verify.openenv.wire.Reward` is
kept as is, ``done`` is a ``bool``), a parsed action object, an ``int`` step index, a
``str`` content, a record instance -- so pydantic's validation re-checks what
:mod:`kiln_verify.openenv.wire` and the episode loop already guarantee, at about half of
each construction's cost. Here each record is assembled as ``model_construct`` would
(the same ``__dict__`` in field order, the same fields-set, no extra or private values)
when the inputs have exactly the types that make validation a pass-through, and through
the validated constructor otherwise.

That equivalence depends on the record classes, which are defined elsewhere, and on
pydantic, so it is only used while both are what it was checked against: the pydantic
release must be :data:`REVIEWED_PYDANTIC`, a fingerprint of each class (its fields,
their types, constraints, defaults and omission rules, its validators and their source,
its configuration; pydantic's own ``repr`` of a field is part of it, hence the release
pin) must equal the one recorded below, and a first build of sample records both ways
must agree. Anything else turns the fast construction off for the process: the
collector is then as fast as before this module, never wrong. Under the reviewed release
``tests/collect/test_collect_fastrecords.py`` fails for a changed record class, so the
change is noticed rather than silently slower; under another release that test is
skipped with the reason (a dependency update must not break the suite).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
from typing import Any, Final

import pydantic

from kiln_verify.openenv.records import observation
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.replay import ObservationResult, ReplayExchange
from kiln_verify.openenv.wire import Observation, Reward
from kiln_verify.records import Record, TurnSegment, fields

__all__ = [
    "action_segment",
    "active",
    "fingerprint",
    "observation_exchange",
    "observation_record",
    "observation_turn",
]

_U64_MAX: Final = 2**64 - 1
_new = object.__new__
_set = object.__setattr__
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")

# The validators the fields below run (module functions of records/fields.py and
# openenv/records/observation.py).
_VALIDATOR_SOURCES: Final = ((fields, "_any_json"), (observation, "_reward"), (fields, "_object"))

REVIEWED_PYDANTIC: Final = "2.14.4"
"""The pydantic release the fingerprints below were recorded under."""

FINGERPRINTS: Final[dict[str, str]] = {
    "ObservationRecord": "ab39ba1cf31c3388a34ef92bb461e0343aad5e937b6f5f43430f7e097a615297",
    "ObservationResult": "ce5ab82760daf0595b7ba3f3478fd56d6980c51a44f3d2339b13a35979f63abf",
    "ReplayExchange": "d55cc9a6e61d2fb427241e639b92f7697acad3657e552fb1ec2c3b88637911df",
    "TurnSegment": "eb8df8adafb9e6c34da1e9956d5ffcf57228629bc3d77042f7293c5cb4c1e145",
}
"""sha256 of :func:`fingerprint` per class, as last reviewed for this module."""


def fingerprint(cls: type[Record]) -> str:
    """A digest of everything about ``cls`` that validation and construction depend on."""
    decorators = cls.__pydantic_decorators__
    parts: list[str] = [
        cls.__qualname__,
        repr([base.__qualname__ for base in cls.__mro__]),
        repr(sorted(cls.model_config.items())),
        repr(cls.__private_attributes__),
        repr(cls.__pydantic_post_init__),
        # which class's __init__ (and model_post_init) an instance gets
        next(c for c in cls.__mro__ if "__init__" in c.__dict__).__qualname__,
        next(c for c in cls.__mro__ if "model_post_init" in c.__dict__).__qualname__,
        repr({name: list(getattr(decorators, name)) for name in _DECORATOR_KINDS}),
    ]
    for name, field in cls.model_fields.items():
        parts.append(f"{name}: {_ADDRESS.sub('', repr(field))}")
    for decorator in decorators.model_validators.values():
        parts.append(inspect.getsource(decorator.func))
    for module, name in _VALIDATOR_SOURCES:
        parts.append(inspect.getsource(getattr(module, name)))
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


_DECORATOR_KINDS: Final = (
    "validators",
    "field_validators",
    "root_validators",
    "model_validators",
    "field_serializers",
    "model_serializers",
    "computed_fields",
)


def _make(cls: type[Record], values: dict[str, Any], fields_set: set[str]) -> Any:
    """An instance exactly as validation leaves it (see ``BaseModel.model_construct``)."""
    record = _new(cls)
    _set(record, "__dict__", values)
    _set(record, "__pydantic_fields_set__", fields_set)
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


def _fast_observation_record(observation: Observation) -> ObservationRecord | None:
    reward, done = observation.reward, observation.done
    if type(reward) is not Reward or type(done) is not bool:
        return None
    record: ObservationRecord = _make(
        ObservationRecord,
        {
            "observation": observation.observation,
            "reward": reward,
            "done": done,
            "metadata": observation.metadata,
        },
        {"observation", "reward", "done", "metadata"},
    )
    return record


def _fast_segment(role: str, content: str, kind: str) -> TurnSegment | None:
    if type(content) is not str:
        return None
    segment: TurnSegment = _make(
        TurnSegment,
        {
            "role": role,
            "content": content,
            "kind": kind,
            "tool_call_id": None,
            "warning_prefix_len": None,
        },
        {"role", "content", "kind"},
    )
    return segment


def _fast_exchange(
    step_index: int, action: dict[str, Any], record: ObservationRecord
) -> ReplayExchange | None:
    if (
        type(step_index) is not int
        or not 0 <= step_index <= _U64_MAX
        or type(action) is not dict
        or type(record) is not ObservationRecord
    ):
        return None
    result = _make(
        ObservationResult, {"kind": "observation", "observation": record}, {"observation"}
    )
    exchange: ReplayExchange = _make(
        ReplayExchange,
        {"step_index": step_index, "action": action, "result": result},
        {"step_index", "action", "result"},
    )
    return exchange


def _same(fast: Any, validated: Any) -> bool:
    if fast is None or type(fast) is not type(validated):
        return False
    left, right = fast.__dict__, validated.__dict__
    return (
        list(left) == list(right)
        and all(left[key] is right[key] or key == "result" for key in left)
        and fast.model_fields_set == validated.model_fields_set
        and fast.__pydantic_extra__ == validated.__pydantic_extra__
        and fast.__pydantic_private__ == validated.__pydantic_private__
        and fast == validated
    )


@functools.cache
def active() -> bool:
    """Whether the record classes are the reviewed ones and a sample build agrees."""
    if pydantic.VERSION != REVIEWED_PYDANTIC:
        return False
    classes: tuple[type[Record], ...] = (
        ObservationRecord,
        ObservationResult,
        ReplayExchange,
        TurnSegment,
    )
    try:
        if any(fingerprint(cls) != FINGERPRINTS.get(cls.__name__) for cls in classes):
            return False
    except (OSError, TypeError):  # no source to read (a bytecode-only install)
        return False
    wire = Observation({"x": [1, 2.5]}, Reward.from_json(1), False, {"m": None})
    record = ObservationRecord.from_wire(wire)
    action = {"arm": 3}
    return (
        _same(_fast_observation_record(wire), record)
        and _same(_fast_segment("assistant", "a", "action"), TurnSegment.action("a"))
        and _same(_fast_segment("tool", "o", "observation"), TurnSegment.observation("o"))
        and _same(
            _fast_exchange(2, action, record),
            ReplayExchange(
                step_index=2, action=action, result=ObservationResult(observation=record)
            ),
        )
    )


def observation_record(observation: Observation) -> ObservationRecord:
    """``ObservationRecord.from_wire(observation)``."""
    if active():
        record = _fast_observation_record(observation)
        if record is not None:
            return record
    return ObservationRecord.from_wire(observation)


def action_segment(content: str) -> TurnSegment:
    """``TurnSegment.action(content)``."""
    if active():
        segment = _fast_segment("assistant", content, "action")
        if segment is not None:
            return segment
    return TurnSegment.action(content)


def observation_turn(content: str) -> TurnSegment:
    """``TurnSegment.observation(content)``."""
    if active():
        segment = _fast_segment("tool", content, "observation")
        if segment is not None:
            return segment
    return TurnSegment.observation(content)


def observation_exchange(
    step_index: int, action: dict[str, Any], record: ObservationRecord
) -> ReplayExchange:
    """``ReplayExchange(step_index=..., action=..., result=ObservationResult(observation=...))``."""
    if active():
        exchange = _fast_exchange(step_index, action, record)
        if exchange is not None:
            return exchange
    return ReplayExchange(
        step_index=step_index, action=action, result=ObservationResult(observation=record)
    )
