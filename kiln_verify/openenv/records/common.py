"""Shared building blocks of the OpenEnv bundle records (kiln-openenv-contract §2.1).

Every record is a frozen pydantic model derived from :class:`Record`:

* unknown keys are refused (``extra="forbid"``), values are validated strictly (no
  ``"1"`` for ``1``, no ``true`` for ``1``, no ``1`` for ``1.0``);
* fields are declared in Kiln's struct order, so :meth:`Record.to_json` emits keys in the
  order the reference documents;
* optional fields that Kiln omits when absent are listed in ``_omit_when_none``: they are
  dropped on output, and an explicit ``null`` for them is refused on input (Kiln never
  writes one, and accepting it would break byte-exact round trips);
* free-form JSON values (observations, reset payloads, state, JSON Schemas) are kept as
  parsed and written with object keys sorted recursively (see docs/contract.md).

:func:`validate_record` is the one path from a parsed JSON value to a record: pydantic
errors become :class:`~kiln_verify.errors.RecordInvalid` naming the JSON path of the first
problem, never the offending value.
"""

from __future__ import annotations

import functools
import math
import operator
import re
import struct
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from kiln_verify.core.digest import Sha256Digest
from kiln_verify.errors import KilnError, RecordInvalid
from kiln_verify.limits import (
    MAX_ERROR_SNIPPET_CHARS,
    MAX_RECORD_ERROR_PATH_CHARS,
    MAX_RECORD_TEXT_BYTES,
)
from kiln_verify.openenv.identity import EnvironmentIdentity, EnvironmentMetadata
from kiln_verify.openenv.wire import ErrorCode, Observation, ProtocolError, Reward

__all__ = [
    "CLIENT_PROFILE",
    "F64",
    "I64_MAX",
    "IDENTITY_SCHEMA",
    "TERMINATION_RULES",
    "U64",
    "AdapterIdentity",
    "BehaviorPolicyIdentity",
    "EnvironmentIdentityRecord",
    "EnvironmentInspection",
    "EnvironmentMetadataRecord",
    "EnvironmentSchema",
    "EpisodeTermination",
    "FreeJson",
    "FreeObject",
    "IdentityText",
    "NonNegF64",
    "ObservationRecord",
    "ProtocolErrorCode",
    "ProtocolErrorRecord",
    "Record",
    "RewardValue",
    "Seed",
    "Sha256",
    "bits_equal",
    "sort_keys",
    "validate_record",
]

I64_MAX: Final = 2**63 - 1
IDENTITY_SCHEMA: Final = "kiln.openenv-identity.v1"
CLIENT_PROFILE: Final = "openenv-http/1.x"
SHA256_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"

R = TypeVar("R", bound="Record")
_FROM_JSON: Final[dict[str, bool]] = {"from_json": True}


# --- free-form JSON ------------------------------------------------------------------------


def sort_keys(value: Any) -> Any:
    """A copy of ``value`` with every object's keys sorted by code point, at every depth.

    This is how serde_json without ``preserve_order`` writes a ``Value`` (a ``BTreeMap``),
    and therefore how every free-form value in our records is written (docs/contract.md).
    """
    if isinstance(value, dict):
        # scalars are copied inline: one call per container, not one per value
        return {
            key: sort_keys(item) if isinstance(item, dict | list) else item
            for key, item in sorted(value.items(), key=_first)
        }
    if isinstance(value, list):
        return [sort_keys(item) if isinstance(item, dict | list) else item for item in value]
    return value


_first = operator.itemgetter(0)


def _any_json(value: Any) -> Any:
    return value


FreeJson = Annotated[
    Any,
    PlainValidator(_any_json),
    PlainSerializer(sort_keys),
    WithJsonSchema({}),
]
"""Any JSON value, kept as parsed; written with object keys sorted recursively."""


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


FreeObject = Annotated[
    dict[str, Any],
    PlainValidator(_object),
    PlainSerializer(sort_keys),
    WithJsonSchema({"type": "object"}),
]
"""A JSON object with free-form content (reset payloads, actions); keys written sorted."""


# --- scalars -------------------------------------------------------------------------------


def _strict_float(value: Any) -> float:
    if type(value) is not float:
        raise ValueError("must be a JSON float spelled with '.' or an exponent, not an integer")
    if not math.isfinite(value):
        raise ValueError("must be finite")
    return value


F64 = Annotated[
    float,
    PlainValidator(_strict_float),
    WithJsonSchema({"type": "number"}),
]
"""A finite f64 compared bit-exactly; JSON integers are refused (docs/contract.md)."""


def _non_negative_float(value: Any) -> float:
    result = _strict_float(value)
    if result < 0 or math.copysign(1.0, result) < 0:
        raise ValueError("must be a non-negative float")
    return result


NonNegF64 = Annotated[
    float,
    PlainValidator(_non_negative_float),
    WithJsonSchema({"type": "number", "minimum": 0}),
]
"""A finite, non-negative f64 (``-0.0`` is refused: Kiln never measures one)."""

U64 = Annotated[StrictInt, Field(ge=0, le=2**64 - 1)]
"""A non-negative integer (Rust ``u64``/``usize``)."""

Seed = Annotated[StrictInt, Field(ge=0, le=I64_MAX)]
"""An episode seed: 0..=i64::MAX."""

Sha256 = Annotated[StrictStr, Field(pattern=SHA256_PATTERN)]
"""A digest spelled ``sha256:<64 lower-case hex>`` (:class:`Sha256Digest` parses it)."""


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""Exactly the characters of Unicode category ``Cc`` (control)."""


_IDENTITY_OK: dict[str, None] = {}
"""Identity texts already accepted (names and URLs repeat on every record); bounded."""
_IDENTITY_OK_MAX: Final = 1024


def _identity_text(value: Any) -> str:
    if type(value) is str and value in _IDENTITY_OK:
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if not value or value != value.strip():
        raise ValueError("must be non-empty and carry no surrounding whitespace")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_RECORD_TEXT_BYTES:
        raise ValueError(f"is longer than MAX_RECORD_TEXT_BYTES = {MAX_RECORD_TEXT_BYTES}")
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    if type(value) is str:
        if len(_IDENTITY_OK) >= _IDENTITY_OK_MAX:
            _IDENTITY_OK.clear()
        _IDENTITY_OK[value] = None
    return value


IdentityText = Annotated[
    str,
    PlainValidator(_identity_text),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_RECORD_TEXT_BYTES}),
]
"""1..256 UTF-8 bytes, trimmed, no control characters (Kiln's identity-text rule)."""


def _reward(value: Any) -> Reward:
    if isinstance(value, Reward):
        return value
    if type(value) is int and not -(2**63) <= value <= I64_MAX:
        raise ValueError("an integer reward must fit an i64")
    if type(value) is float and not math.isfinite(value):
        raise ValueError("a float reward must be finite")
    try:
        return Reward.from_json(value)
    except KilnError:
        raise ValueError("must be null, a boolean, an integer or a float") from None


RewardValue = Annotated[
    Reward,
    PlainValidator(_reward),
    PlainSerializer(lambda reward: reward.to_json()),
    WithJsonSchema({"type": ["null", "boolean", "integer", "number"]}),
]
"""The tagged reward of :mod:`kiln_verify.openenv.wire`: ``1`` and ``1.0`` stay distinct."""


def bits_equal(left: float, right: float) -> bool:
    """Bit-exact f64 equality (``0.0`` and ``-0.0`` differ), as Kiln's verifier compares."""
    if type(left) is float and type(right) is float:
        # Equal non-zero floats have equal bits; zeros differ by sign only; unequal floats
        # differ unless both are NaN (whose payload bits decide below).
        if left == right:
            return left != 0.0 or math.copysign(1.0, left) == math.copysign(1.0, right)
        if left == left or right == right:  # at most one of them is NaN
            return False
    return struct.pack("<d", left) == struct.pack("<d", right)


# --- the base class ------------------------------------------------------------------------


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


# --- behaviour-policy identity (kiln-inference-v1 RolloutBehaviorPolicyIdentityV1) ---------


class AdapterIdentity(Record):
    """The LoRA adapter a behaviour policy used: name plus exact content digest."""

    name: IdentityText
    content_sha256: Sha256


class BehaviorPolicyIdentity(Record):
    """``RolloutBehaviorPolicyIdentityV1``: which model weights and runtime produced actions."""

    _omit_when_none = frozenset({"adapter"})

    served_model_id: IdentityText
    base_model_sha256: Sha256
    adapter: AdapterIdentity | None = None
    inference_config_sha256: Sha256
    implementation: IdentityText


# --- environment identity and inspection ---------------------------------------------------


class EnvironmentMetadataRecord(Record):
    """The typed ``/metadata`` projection inside a recorded identity (six known keys).

    Differs from :class:`kiln_verify.openenv.identity.EnvironmentMetadata`: the contract
    requires ``description`` (a string, possibly empty) and the four optional texts are
    omitted when absent.
    """

    _omit_when_none = frozenset({"readme_content", "version", "author", "documentation_url"})

    name: Annotated[StrictStr, Field(min_length=1)]
    description: StrictStr
    readme_content: StrictStr | None = None
    version: StrictStr | None = None
    author: StrictStr | None = None
    documentation_url: StrictStr | None = None


class EnvironmentIdentityRecord(Record):
    """``kiln.openenv-identity.v1`` as embedded in summaries and replay manifests.

    Same keys and order as :class:`kiln_verify.openenv.identity.EnvironmentIdentity`, but
    ``authentication`` may be absent (legacy v2 receipts; it then means ``none``) and
    ``discovery_sha256`` is omitted when absent. Convert with :meth:`from_identity` and
    :meth:`to_identity`.
    """

    _omit_when_none = frozenset({"authentication", "discovery_sha256"})

    schema_: Literal["kiln.openenv-identity.v1"] = Field(IDENTITY_SCHEMA, alias="schema")
    client_profile: Literal["openenv-http/1.x"] = CLIENT_PROFILE
    base_url: Annotated[StrictStr, Field(min_length=1)]
    websocket_url: Annotated[StrictStr, Field(pattern=r"^wss?://")]
    authentication: Literal["none", "bearer"] | None = None
    openapi_version: StrictStr | None
    environments: list[StrictStr]
    metadata: EnvironmentMetadataRecord
    schema_sha256: Sha256
    discovery_sha256: Sha256 | None = None

    @property
    def authentication_method(self) -> Literal["none", "bearer"]:
        """The method, with the legacy absent value read as ``none`` (schema default)."""
        return self.authentication or "none"

    @classmethod
    def from_identity(cls, identity: EnvironmentIdentity) -> EnvironmentIdentityRecord:
        """Record a live identity; a missing metadata description is recorded as ``""``."""
        meta = identity.metadata
        return cls(
            schema=IDENTITY_SCHEMA,
            client_profile=CLIENT_PROFILE,
            base_url=identity.base_url,
            websocket_url=identity.websocket_url,
            authentication=identity.authentication,
            openapi_version=identity.openapi_version,
            environments=list(identity.environments),
            metadata=EnvironmentMetadataRecord(
                name=meta.name,
                description=meta.description or "",
                readme_content=meta.readme_content,
                version=meta.version,
                author=meta.author,
                documentation_url=meta.documentation_url,
            ),
            schema_sha256=identity.schema_sha256,
            discovery_sha256=identity.discovery_sha256,
        )

    def to_identity(self) -> EnvironmentIdentity:
        """The live-comparison form (:func:`kiln_verify.openenv.identity.ensure_unchanged`).

        An empty recorded description becomes ``None`` only if it was empty: discovery
        without a description compares equal to a recorded ``""``.
        """
        meta = self.metadata
        return EnvironmentIdentity(
            schema=IDENTITY_SCHEMA,
            client_profile=CLIENT_PROFILE,
            base_url=self.base_url,
            websocket_url=self.websocket_url,
            authentication=self.authentication_method,
            openapi_version=self.openapi_version,
            environments=list(self.environments),
            metadata=EnvironmentMetadata(
                name=meta.name,
                description=meta.description or None,
                readme_content=meta.readme_content,
                version=meta.version,
                author=meta.author,
                documentation_url=meta.documentation_url,
            ),
            schema_sha256=self.schema_sha256,
            discovery_sha256=self.discovery_sha256,
        )

    def schema_digest(self) -> Sha256Digest:
        return Sha256Digest.parse(self.schema_sha256)


class EnvironmentSchema(Record):
    """The raw ``GET /schema`` JSON Schemas (free-form; written with sorted keys)."""

    action: FreeJson
    observation: FreeJson
    state: FreeJson


class EnvironmentInspection(Record):
    """One discovered environment: identity plus schemas, in ``--environment`` order."""

    identity: EnvironmentIdentityRecord
    schema_: EnvironmentSchema = Field(alias="schema")


# --- observations and protocol errors ------------------------------------------------------

ProtocolErrorCode = Literal[
    "INVALID_JSON",
    "UNKNOWN_TYPE",
    "VALIDATION_ERROR",
    "EXECUTION_ERROR",
    "CAPACITY_REACHED",
    "FACTORY_ERROR",
    "SESSION_ERROR",
]

EpisodeTermination = Literal["done", "max_steps", "invalid_model_action", "protocol_error"]

TERMINATION_RULES: Final[dict[str, Any]] = {
    "allOf": [
        {
            "if": {"properties": {"termination": {"const": "done"}}},
            "then": {"properties": {"terminal_done": {"const": True}}},
            "else": {"properties": {"terminal_done": {"const": False}}},
        },
        {
            "if": {"properties": {"termination": {"const": "protocol_error"}}},
            "then": {"required": ["protocol_error_code"]},
            "else": {"not": {"required": ["protocol_error_code"]}},
        },
    ]
}
"""JSON Schema conditionals: ``terminal_done`` ⇔ done; ``protocol_error_code`` ⇔ protocol_error."""


class ProtocolErrorRecord(Record):
    """A recorded OpenEnv error reply (the whole ``data`` object, optional keys omitted)."""

    _omit_when_none = frozenset({"errors", "active_sessions", "max_sessions", "factory_name"})

    code: ProtocolErrorCode
    message: StrictStr
    errors: list[FreeJson] | None = None
    active_sessions: U64 | None = None
    max_sessions: U64 | None = None
    factory_name: StrictStr | None = None

    @property
    def recoverable(self) -> bool:
        return not ErrorCode(self.code).is_terminal

    @classmethod
    def from_wire(cls, error: ProtocolError) -> ProtocolErrorRecord:
        """Record an error reply decoded by :mod:`kiln_verify.openenv.wire`."""
        return cls(
            code=error.code.value,
            message=error.message,
            errors=error.errors,
            active_sessions=error.active_sessions,
            max_sessions=error.max_sessions,
            factory_name=error.factory_name,
        )


class ObservationRecord(Record):
    """A recorded observation: payload, tagged reward, done, optional metadata.

    ``observation`` and ``metadata`` are free-form (written with sorted keys).
    """

    _omit_when_none = frozenset({"metadata"})

    observation: FreeJson
    reward: RewardValue
    done: StrictBool
    metadata: FreeJson = None

    @classmethod
    def from_wire(cls, observation: Observation) -> ObservationRecord:
        """Record an observation decoded by :mod:`kiln_verify.openenv.wire` (tag kept)."""
        return cls(
            observation=observation.observation,
            reward=observation.reward,
            done=observation.done,
            metadata=observation.metadata,
        )
