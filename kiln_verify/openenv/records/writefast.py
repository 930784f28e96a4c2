"""Any record written by ``orjson``, laid out from the model's declared fields, proven equal.

Record-shaped uses of :mod:`kiln_verify.core.jsonfastwrite` (which explains when an
``orjson`` text is accepted). :func:`record_pretty` and :func:`record_compact` give the
bytes of ``dumps_pretty(record.to_json())`` / ``dumps_compact(record.to_json())`` without
``to_json``, which re-sorts every free-form value in Python (about as costly as writing
the replay manifest): each free-form value is written once by ``orjson`` with sorted
keys (re-indented to its depth in pretty text) and inserted as an ``orjson.Fragment``,
when the tree of the record is written (``orjson``'s ``default``), so that one walk of a
record (:func:`record_tree`) can be written both ways: the journal writes each replay
group compact as the group ends, and the replay manifest takes the same trees pretty.

Nothing here names a record or a field. The layout of a class is derived once from what
the model declares (:func:`_layout`): its fields in declaration order, each one's output
name (alias), ``exclude``, ``exclude_if`` (the base's ``_omit_when_none``), the base's
``_omit_when_unset`` rule, which fields hold free-form JSON (a ``sort_keys`` serializer,
directly or on the items of a list), other plain serializers (applied, and their result
must be a JSON scalar) and the record classes a field may hold. A class declaring anything
else that shapes its output (field or other model serializers, computed fields, ``ser_*``
settings, a serializer on a nested type the layout cannot follow) has no layout and goes
through ``to_json``, as does any value of a type the field does not declare. So a new
field needs no edit here; ``tests/openenv/records/test_writefast.py`` compares both writers on
generated instances of every record class.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Union

import orjson
from pydantic import PlainSerializer

from kiln_verify.core.jsonfastwrite import (
    PLAIN,
    PRETTY,
    SORTED,
    SORTED_PRETTY,
    pretty_checked,
    proven_compact,
)
from kiln_verify.core.jsonio import dumps_compact, dumps_pretty
from kiln_verify.records import Record, sort_keys

__all__ = [
    "observation_compact",
    "record_compact",
    "record_compact_unproven",
    "record_pretty",
    "record_tree",
]

# "\n" plus the pretty indent of each depth a fragment is inserted at.
_NEWLINE_INDENT: Final = tuple(b"\n" + b"  " * depth for depth in range(32))
_SCALARS: Final = (str, int, float, bool, type(None))
#: Values :func:`_value` writes as they are, with nothing to check (a float may be
#: non-finite, a list may hold records).
_EXACT: Final = frozenset({str, int, bool, type(None)})
_KNOWN_CONFIG: Final = frozenset(
    {"extra", "frozen", "populate_by_name", "json_schema_extra", "title", "strict"}
)


class _NoLayout(Exception):
    """The value (or its class) is not one the derived layout writes: use ``to_json``."""


@dataclass(frozen=True, slots=True)
class _Member:
    """One declared field as the serializer writes it."""

    name: str
    key: str
    exclude_if: Callable[[Any], bool] | None
    unset_omitted: bool
    free: bool
    scalar: Callable[[Any], Any] | None
    records: frozenset[type[Record]]


_LAYOUTS: dict[type[Record], tuple[_Member, ...] | None] = {}


def _serializers(metadata: list[Any] | tuple[Any, ...]) -> list[PlainSerializer]:
    return [item for item in metadata if isinstance(item, PlainSerializer)]


def _shape(annotation: Any) -> tuple[bool, frozenset[type[Record]]]:
    """(holds free-form JSON, the record classes it may hold) of a nested annotation;
    :class:`_NoLayout` for a nested serializer other than a free-form one where the
    layout could not follow it (inside a mapping, or any other function)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        inner, *metadata = typing.get_args(annotation)
        found = _serializers(metadata)
        if found:
            if len(found) != 1 or found[0].func is not sort_keys:
                raise _NoLayout
            free, records = _shape(inner)
            if records:
                raise _NoLayout
            return True, frozenset()
        return _shape(inner)
    if origin in (Union, types.UnionType, list, typing.Literal):
        free, records = False, frozenset[type[Record]]()
        if origin is typing.Literal:
            return False, records
        for argument in typing.get_args(annotation):
            more_free, more = _shape(argument)
            free, records = free or more_free, records | more
        if free and records:
            raise _NoLayout
        return free, records
    if origin is not None:  # dict[...], tuple[...]: a serializer inside would be reordered
        for argument in typing.get_args(annotation):
            free, records = _shape(argument)
            if free or records:
                raise _NoLayout
        return False, frozenset()
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return False, frozenset({annotation})
    return False, frozenset()


def _layout(cls: type[Record]) -> tuple[_Member, ...] | None:
    """The class's members as pydantic's JSON mode writes them, or ``None`` (no layout)."""
    if cls in _LAYOUTS:
        return _LAYOUTS[cls]
    layout: tuple[_Member, ...] | None
    try:
        layout = _derive(cls)
    except _NoLayout:
        layout = None
    _LAYOUTS[cls] = layout
    return layout


def _takes_info(func: Callable[..., Any]) -> bool:
    """Whether a plain serializer takes pydantic's info argument (the layout does not
    pass one, so such a field has no layout)."""
    try:
        return len(inspect.signature(func).parameters) != 1
    except (TypeError, ValueError):
        return True


def _derive(cls: type[Record]) -> tuple[_Member, ...]:
    decorators = cls.__pydantic_decorators__
    if decorators.field_serializers or decorators.computed_fields:
        raise _NoLayout
    unset = frozenset(cls._omit_when_unset)
    serializers = list(decorators.model_serializers.values())
    # The only model serializer a record may declare is the base's omit-when-unset wrap.
    if serializers and not (unset and len(serializers) == 1 and serializers[0].info.mode == "wrap"):
        raise _NoLayout
    if set(cls.model_config) - _KNOWN_CONFIG:
        raise _NoLayout
    members = []
    for name, field in cls.model_fields.items():
        if field.exclude:
            continue
        found = _serializers(field.metadata)
        free, records = _shape(field.annotation)
        scalar = None
        if found:
            serializer = found[0]
            if len(found) != 1 or serializer.when_used != "always" or records:
                raise _NoLayout
            if serializer.func is not sort_keys and _takes_info(serializer.func):
                raise _NoLayout
            if serializer.func is sort_keys:
                free = True
            else:
                scalar = typing.cast(Callable[[Any], Any], serializer.func)
        members.append(
            _Member(
                name=name,
                key=field.serialization_alias or field.alias or name,
                exclude_if=field.exclude_if,
                unset_omitted=name in unset,
                free=free,
                scalar=scalar,
                records=records,
            )
        )
    return tuple(members)


class _Free:
    """A free-form value (``sort_keys`` on output) at ``depth`` of the document, in a tree,
    written only when the tree is (by :func:`_compact_free` or :func:`_pretty_free`, the
    ``default`` of ``orjson``): one tree serves both spellings."""

    __slots__ = ("depth", "value")

    def __init__(self, value: Any, depth: int) -> None:
        self.value = value
        self.depth = depth


def _compact_free(free: Any) -> orjson.Fragment:
    if type(free) is not _Free:
        raise TypeError  # orjson's refusal: the reference decides
    return orjson.Fragment(orjson.dumps(free.value, option=SORTED))


def _unsorted_free(free: Any) -> Any:
    """A free-form value as it is, keys in its own order: for text only parsed back
    (:func:`record_compact_unproven`), where the order of keys is not part of the value."""
    if type(free) is not _Free:
        raise TypeError
    return free.value


def _pretty_free(free: Any) -> orjson.Fragment:
    if type(free) is not _Free:
        raise TypeError
    raw = orjson.dumps(free.value, option=SORTED_PRETTY)
    if b"\n" in raw:
        raw = raw.replace(b"\n", _NEWLINE_INDENT[free.depth])
    return orjson.Fragment(raw)


def _value(value: Any, records: frozenset[type[Record]], depth: int) -> Any:
    """A non-free member value: records by their layout, lists item by item."""
    if isinstance(value, Record):
        if type(value) not in records:
            raise _NoLayout  # pydantic writes a value by its declared type, not its own
        return _tree(value, depth)
    if type(value) is list and records:
        return [_value(item, records, depth + 1) for item in value]
    _finite(value)
    return value


def _finite(value: Any) -> None:
    """Refuse a non-finite float outside free-form values: ``orjson`` writes it as
    ``null``, while ``to_json`` keeps it for a typed field (and the reference refuses it)."""
    kind = type(value)
    if kind is float:
        if value - value != 0.0:  # NaN or an infinity
            raise _NoLayout
    elif kind is list or kind is tuple:
        for item in value:
            _finite(item)
    elif kind is dict:
        for item in value.values():
            _finite(item)


def _tree(record: Record, depth: int, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``record.to_json()`` at ``depth`` (its members at ``depth + 1``), free-form values
    left as :class:`_Free`; a member named in ``given`` is that value, already written."""
    layout = _layout(type(record))
    if layout is None:
        raise _NoLayout
    values = record.__dict__
    tree: dict[str, Any] = {}
    for member in layout:
        value = values[member.name]
        if member.exclude_if is not None and member.exclude_if(value):
            continue
        if member.unset_omitted and member.name not in record.model_fields_set:
            continue
        if given is not None and member.name in given:
            tree[member.key] = given[member.name]
        elif type(value) in _EXACT and not member.free and member.scalar is None:
            tree[member.key] = value  # the common case of _value: nothing to check
        elif member.free:
            tree[member.key] = _Free(value, depth + 1)
        elif member.scalar is not None:
            written = member.scalar(value)
            if type(written) not in _SCALARS:
                raise _NoLayout
            _finite(written)
            tree[member.key] = written
        else:
            tree[member.key] = _value(value, member.records, depth + 1)
    return tree


def record_tree(record: Record, depth: int) -> dict[str, Any] | None:
    """The record laid out at ``depth`` (2: an item of a list member of a document), for
    ``given``: one walk of the record that both a compact and a pretty document take (a
    journal entry and the bundle's replay manifest). ``None`` where the layout does not
    write the record. The tree holds the record's values, not copies: it stays true while
    the record is not changed (records are not changed once built)."""
    try:
        return _tree(record, depth)
    except Exception:  # the callers' own writers decide
        return None


def record_pretty(record: Record, given: Mapping[str, Any] | None = None) -> bytes:
    """``dumps_pretty(record.to_json())`` (pretty JSON + LF): derived where proven, else
    the reference, which alone decides every error. A member named in ``given`` is that
    value, already laid out for its depth (a list of :func:`record_tree` trees at depth
    2 for a list member): the caller vouches that it lays out the member's records."""
    try:
        raw = orjson.dumps(_tree(record, 0, given), default=_pretty_free, option=PRETTY)
    except Exception:  # any failure: the reference runs and decides the error
        data = None
    else:
        data = pretty_checked(raw)
    return dumps_pretty(record.to_json()) if data is None else data


def record_compact(record: Record) -> bytes:
    """``dumps_compact(record.to_json())``: derived where proven, else the reference."""
    try:
        raw = orjson.dumps(_tree(record, 0), default=_compact_free, option=PLAIN)
        data = proven_compact(raw, record.to_json)
    except Exception:  # any failure: the reference runs and decides the error
        data = None
    return dumps_compact(record.to_json()) if data is None else data


def record_compact_unproven(record: Record, given: Mapping[str, Any] | None = None) -> bytes | None:
    """Compact JSON of ``record`` from its layout, by ``orjson``, *not* proven equal to
    ``dumps_compact(record.to_json())``: a float may be spelled with an exponent, the
    keys of a free-form value keep their own order and the depth bound is not searched
    for (the two proofs that make :func:`record_compact` cost a second walk of a large
    record). For text that is only ever parsed back into the
    record by the strict reader (a journal entry), never hashed as a contract's bytes.
    A member named in ``given`` is that value, already written by the caller from the
    member's value: a :func:`record_tree` tree, or an ``orjson.Fragment`` of its JSON
    (a journal entry's corpus group is its corpus line). ``None`` where the layout does
    not write the record."""
    try:
        return orjson.dumps(_tree(record, 0, given), default=_unsorted_free, option=PLAIN)
    except Exception:  # the caller's own writer decides
        return None


observation_compact = record_compact
"""The reset observation's group-integrity preimage (``serialize.reset_observation_sha256``)."""
