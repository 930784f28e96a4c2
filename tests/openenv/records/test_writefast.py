"""The derived record writer gives the reference writer's bytes for every record class.

``records/writefast`` lays a record out from its model's declared fields; here instances
of every :class:`Record` subclass are generated from the same declarations (built with
``model_construct``, so that cross-field validators do not have to be satisfied: the
writer must agree with ``to_json`` on whatever a record holds) and both writers must
give the same bytes, or the derived one must step aside for the reference and then give
its bytes or its error. A check that the derived route is really taken for the records
the collector writes keeps a fast path that never runs from passing.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import types
import typing
import warnings
from functools import cache
from typing import Annotated, Any, Literal, Union

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import PlainSerializer

import kiln_verify
import pytest_kiln
from kiln_verify.core.jsonio import dumps_compact, dumps_pretty
from kiln_verify.errors import KilnError
from kiln_verify.openenv.protocol.wire import Reward
from kiln_verify.openenv.records import writefast
from kiln_verify.records import Record, sort_keys

JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
FREE = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
REWARDS = st.builds(
    Reward.from_json,
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(-1e9, 1e9),
)


def _all_records() -> list[type[Record]]:
    """Every record class the packages define. Subclasses exist only once their module is
    imported, so every module is imported first: the table must not depend on which test
    modules happened to be collected before this one (it did: 76 classes alone, 97 in the
    whole suite), and classes a test declares are not the packages' records."""
    for package in (kiln_verify, pytest_kiln):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith(".__main__"):
                importlib.import_module(module.name)
    found: set[type[Record]] = set()
    todo = [Record]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and not sub.__name__.startswith("_"):
                found.add(sub)
                todo.append(sub)
    packaged = {cls for cls in found if cls.__module__.split(".")[0] in _PACKAGES}
    return sorted(packaged, key=lambda cls: (cls.__module__, cls.__qualname__))


_PACKAGES = ("kiln_verify", "pytest_kiln")


RECORDS = _all_records()


def _is_free(metadata: Any) -> bool:
    return any(isinstance(m, PlainSerializer) and m.func is sort_keys for m in metadata)


def _strategy(annotation: Any, metadata: Any, depth: int) -> st.SearchStrategy[Any]:
    """Values of the declared type (unconstrained beyond it: the writers, not validation,
    are under test)."""
    if _is_free(metadata):
        return FREE
    if any(isinstance(m, PlainSerializer) for m in metadata):
        return REWARDS  # the one other serializer the records declare: the tagged reward
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        inner, *more = typing.get_args(annotation)
        return _strategy(inner, more, depth)
    if origin in (Union, types.UnionType):
        return st.one_of([_strategy(arg, (), depth) for arg in typing.get_args(annotation)])
    if origin is Literal:
        return st.sampled_from(typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        return st.lists(_strategy(item, (), depth + 1), max_size=2 if depth < 4 else 0)
    if origin is tuple:
        return st.tuples(
            *(_strategy(a, (), depth + 1) for a in typing.get_args(annotation) if a is not Ellipsis)
        )
    if origin is dict:
        _, value = typing.get_args(annotation)
        return st.dictionaries(st.text(max_size=4), _strategy(value, (), depth + 1), max_size=2)
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return instances(annotation, depth + 1)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(min_value=-(2**64), max_value=2**64)
    if annotation is float:
        return st.floats(allow_nan=True, allow_infinity=True)
    if annotation is str:
        return st.text(max_size=8)
    if annotation is type(None):
        return st.none()
    return FREE  # Any, and anything else: free-form values


@cache
def instances(cls: type[Record], depth: int = 0) -> st.SearchStrategy[Record]:
    """Records of ``cls`` via ``model_construct``; optional fields given or left out."""
    fields = {}
    for name, field in cls.model_fields.items():
        values = _strategy(field.annotation, field.metadata, depth)
        if not field.is_required():
            values = st.one_of(st.just(_ABSENT), values)
        fields[name] = values

    def build(drawn: dict[str, Any]) -> Record:
        given_ = {name: value for name, value in drawn.items() if value is not _ABSENT}
        return cls.model_construct(**given_)

    return st.fixed_dictionaries(fields).map(build)


_ABSENT = object()


def _outcome(write: Any, record: Record) -> tuple[str, Any]:
    try:
        return "ok", write(record)
    except KilnError as exc:
        return exc.code, str(exc)
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: cls.__qualname__)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_derived_writer_is_the_reference_writer(cls: type[Record], data: st.DataObject) -> None:
    record = data.draw(instances(cls))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns about unvalidated values it writes
        pretty = _outcome(writefast.record_pretty, record)
        compact = _outcome(writefast.record_compact, record)
        assert pretty == _outcome(lambda r: dumps_pretty(r.to_json()), record)
        assert compact == _outcome(lambda r: dumps_compact(r.to_json()), record)
        unproven = writefast.record_compact_unproven(record)
    if unproven is not None:  # a journal entry's text: the same value, spelled any way
        assert compact[0] == "ok"
        assert _typed(orjson.loads(unproven)) == _typed(orjson.loads(compact[1]))


def _typed(value: Any) -> Any:
    """A parsed JSON value compared with its number types and float bits (1 is not 1.0)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, repr(value))


def test_every_collector_record_has_a_derived_layout() -> None:
    """The classes the collector writes are laid out (a layout that silently fell back
    would pass every equality above)."""
    from kiln_verify.openenv.records import environment, observation, replay, rollout, summary

    for cls in (
        replay.ReplayManifest, replay.ReplayGroup, replay.ReplayCandidate,
        replay.ReplayExchange, replay.ObservationResult, replay.ProtocolErrorResult,
        observation.ObservationRecord, observation.ProtocolErrorRecord,
        environment.EnvironmentInspection,
        rollout.AgenticGroup, rollout.ScoredRollout, summary.RolloutSummary,
    ):  # fmt: skip
        assert writefast._layout(cls) is not None, cls


def test_a_class_with_a_field_serializer_has_no_layout() -> None:
    from pydantic import field_serializer

    class Odd(Record):
        value: int

        @field_serializer("value")
        def _twice(self, value: int) -> int:
            return 2 * value

    record = Odd(value=2)
    assert writefast._layout(Odd) is None
    assert writefast.record_compact(record) == b'{"value":4}'


def test_a_new_field_needs_no_edit() -> None:
    from kiln_verify.openenv.records.observation import ObservationRecord
    from kiln_verify.records import FreeJson

    class Extended(ObservationRecord):
        _omit_when_none = frozenset({"metadata", "note"})

        note: FreeJson = None

    record = Extended(
        observation={"b": 1, "a": 2},
        reward=Reward.from_json(1),
        done=False,
        note={"z": [1], "y": 0.5},
    )
    assert writefast._layout(Extended) is not None
    assert writefast.record_pretty(record) == dumps_pretty(record.to_json())
    assert b'"note":{"y":0.5,"z":[1]}' in writefast.record_compact(record)


def test_not_a_number_is_written_as_the_reference_writes_it() -> None:
    from kiln_verify.openenv.records.observation import ObservationRecord

    record = ObservationRecord.model_construct(
        observation={"x": math.nan}, reward=Reward.from_json(None), done=True
    )
    assert writefast.record_compact(record) == dumps_compact(record.to_json())
