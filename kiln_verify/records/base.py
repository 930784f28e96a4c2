"""The base of every contract record, and the one path from parsed JSON to a record.

Every record is a frozen pydantic model derived from :class:`Record`:

* unknown keys are refused (``extra="forbid"``), values are validated strictly;
* fields are declared in Kiln's struct order, so :meth:`Record.to_json` emits keys in the
  order the reference documents;
* optional fields that Kiln omits when absent are listed in ``_omit_when_none``: they are
  dropped on output, and an explicit ``null`` for them is refused on input (Kiln never
  writes one, and accepting it would break byte-exact round trips).

:func:`validate_record` is the one path from a parsed JSON value to a record: pydantic
errors become :class:`~kiln_verify.errors.RecordInvalid` naming the JSON path of the first
problem, never the offending value. The OpenEnv bundle records and the HF/TRL manifests
both build on this module, so both contracts share one reading discipline.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, TypeVar, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from kiln_verify.errors import RecordInvalid
from kiln_verify.limits import MAX_ERROR_SNIPPET_CHARS, MAX_RECORD_ERROR_PATH_CHARS

__all__ = ["Record", "omit_unset", "validate_record"]

R = TypeVar("R", bound="Record")
_FROM_JSON: Final[dict[str, bool]] = {"from_json": True}


def _is_none(value: Any) -> bool:
    return value is None


def omit_unset(record: Record, handler: SerializerFunctionWrapHandler) -> Any:
    """The body of a wrap serializer for records with ``_omit_when_unset`` fields."""
    data = handler(record)
    if isinstance(data, dict):
        for key in record._omit_when_unset:
            if key not in record.model_fields_set:
                data.pop(key, None)
    return data


class Record(BaseModel):
    """Base of every bundle record: closed, frozen, struct-ordered, omit-when-absent."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    _omit_when_none: ClassVar[frozenset[str]] = frozenset()
    """Output names (aliases) of optional fields Kiln omits rather than writing ``null``."""

    _omit_when_unset: ClassVar[frozenset[str]] = frozenset()
    """Optional fields (no alias) whose value may be JSON ``null`` and which are omitted
    when they were not given at all (``model_fields_set``), e.g. a replay ``final_state``."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_explicit_null(cls, data: Any, info: ValidationInfo) -> Any:
        # Only documents read from JSON (validate_record) are held to this; Python
        # callers may pass None for "absent".
        if type(data) is dict or isinstance(data, Mapping):
            rules = _NULL_RULES.get(cls)
            if rules is None:
                rules = _NULL_RULES[cls] = (tuple(cls._omit_when_none), _constant_keys(cls))
            omit, constants = rules
            if (omit or constants) and info.context == _FROM_JSON:
                for key in omit:
                    # one lookup: a present key whose value is null (absent reads as False)
                    if data.get(key, False) is None:
                        raise ValueError(f"{key!r} must be omitted rather than null")
                # A constant tag (`schema`, `client_profile`) has a default for Python
                # callers, but a document that leaves it out is not the record it claims
                # to be.
                if not data.keys() >= constants:
                    for key in constants:
                        if key not in data:
                            raise ValueError(f"{key!r} is required")
        return data

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Omit ``_omit_when_none`` fields through pydantic's own ``exclude_if``.

        A per-field rule in the compiled serializer instead of a Python wrap serializer
        on every record: dumping the replay manifest no longer calls back into Python
        once per nested model (docs/performance.md, "Collector overhead").
        """
        super().__pydantic_init_subclass__(**kwargs)
        names = {field.alias or name: name for name, field in cls.model_fields.items()}
        unknown = cls._omit_when_none - names.keys()
        if unknown:
            raise TypeError(f"{cls.__name__}._omit_when_none names no field: {sorted(unknown)}")
        changed = False
        for key in cls._omit_when_none:
            field = cls.model_fields[names[key]]
            if field.exclude_if is None:
                field.exclude_if = _is_none
                changed = True
        if changed:
            cls.model_rebuild(force=True)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready Python values, keys in Kiln's order."""
        result: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return result

    @classmethod
    def from_json(
        cls: type[R], value: Any, *, source: str | None = None, line: int | None = None
    ) -> R:
        """Validate an already-parsed JSON value (see :func:`validate_record`)."""
        return validate_record(cls, value, source=source, line=line)


def _render_path(location: tuple[int | str, ...]) -> str:
    path = "$"
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier():
            path += f".{part}"
        else:
            path += f"[{part[:MAX_ERROR_SNIPPET_CHARS]!r}]"
    if len(path) > MAX_RECORD_ERROR_PATH_CHARS:
        path = path[: MAX_RECORD_ERROR_PATH_CHARS - 3] + "..."
    return path


_TAGGED_UNION_FIELDS = frozenset({"result"})
"""Fields holding a discriminated union; pydantic puts the tag into the error location."""


def _tag_free_location(location: tuple[int | str, ...]) -> tuple[int | str, ...]:
    parts: list[int | str] = []
    skip = False
    for part in location:
        if skip:
            skip = False
            continue
        parts.append(part)
        skip = part in _TAGGED_UNION_FIELDS
    return tuple(parts)


_NULL_RULES: dict[type[Record], tuple[tuple[str, ...], frozenset[str]]] = {}
"""Per record class: the keys that must not be ``null`` and the constant tags (cached)."""


@functools.cache
def _constant_keys(cls: type[Record]) -> frozenset[str]:
    """Output names of fields typed as a single-value `Literal` (schema and profile tags)."""
    keys = set()
    for name, field in cls.model_fields.items():
        annotation = field.annotation
        if get_origin(annotation) is Literal and len(get_args(annotation)) == 1:
            keys.add(field.alias or name)
    return frozenset(keys)


def validate_record(
    model: type[R],
    value: Any,
    *,
    source: str | None = None,
    line: int | None = None,
    within: tuple[str, tuple[int | str, ...]] | None = None,
) -> R:
    """Validate a parsed JSON value strictly; errors are ``record_invalid`` with a JSON path.

    The message names the first problem's location and pydantic's rule text for it; input
    values are never echoed (pydantic's rule texts quote only expected literals/patterns).
    ``within = (document model name, location prefix)`` reports an element validated on
    its own (a streamed group or rollout record) as if validated inside its document.
    """
    try:
        return model.model_validate(value, strict=True, context=_FROM_JSON)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        name, prefix = within if within is not None else (model.__name__, ())
        where = _render_path(_tag_free_location((*prefix, *first["loc"])))
        rule = str(first["msg"]).removeprefix("Value error, ")
        if len(rule) > 2 * MAX_ERROR_SNIPPET_CHARS:
            rule = rule[: 2 * MAX_ERROR_SNIPPET_CHARS] + "..."
        extra = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise RecordInvalid(f"{name} at {where}: {rule}{extra}", path=source, line=line) from None
