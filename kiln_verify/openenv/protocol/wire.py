"""Sans-I/O OpenEnv WebSocket frames: encode requests, decode and classify replies.

Nothing here touches a socket, so the exact byte rules (strict JSON, the server-frame cap,
the closed observation shape, the tagged reward, the seven error codes) are testable with
plain values and property tests, and :mod:`kiln_verify.openenv.protocol.session` only moves bytes.
Every decoding failure is a :class:`~kiln_verify.errors.ProtocolViolation` (or
:class:`~kiln_verify.errors.UnexpectedResponse` for a well-formed frame of the wrong type),
which the session turns into poisoning: a peer that breaks the protocol once is never
trusted with another request on that socket.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kiln_verify.core.jsonfast import MISS, canonical_value
from kiln_verify.core.jsonio import dumps_compact, loads_object
from kiln_verify.errors import (
    KilnError,
    LimitExceeded,
    ProtocolViolation,
    UnexpectedResponse,
    snippet,
)
from kiln_verify.limits import (
    MAX_CLIENT_FRAME_BYTES,
    MAX_JSON_DEPTH,
    MAX_PROTOCOL_MESSAGE_CHARS,
    MAX_SERVER_FRAME_BYTES,
)

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1


class ErrorCode(enum.StrEnum):
    """The seven OpenEnv ``WSErrorCode`` values (identical in 0.3.0 and 0.10.0)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"

    @property
    def is_terminal(self) -> bool:
        """Terminal codes are followed by close 1000: the session is gone (Kiln's split)."""
        return self in _TERMINAL


_TERMINAL = frozenset(
    {ErrorCode.CAPACITY_REACHED, ErrorCode.FACTORY_ERROR, ErrorCode.SESSION_ERROR}
)

RewardKind = Literal["null", "bool", "integer", "float"]


@dataclass(frozen=True, slots=True)
class Reward:
    """A reward exactly as it arrived: null, bool, integer or float are distinct values.

    Equality and hash include the tag, so ``Reward.integer(1) != Reward.float(1.0)`` and a
    replay notices an environment that switched reward types. Integers that do not fit an
    i64 become floats (Kiln's rule); non-finite floats are refused. Python's ``json`` reads
    ``-0`` as the integer 0, so a server sending ``-0`` yields ``Reward.integer(0)``, while
    ``-0.0`` stays a float.
    """

    kind: RewardKind
    value: bool | int | float | None

    def __post_init__(self) -> None:
        ok = (
            (self.kind == "null" and self.value is None)
            or (self.kind == "bool" and isinstance(self.value, bool))
            or (
                self.kind == "integer"
                and type(self.value) is int
                and _I64_MIN <= self.value <= _I64_MAX
            )
            or (self.kind == "float" and type(self.value) is float and math.isfinite(self.value))
        )
        if not ok:
            raise ProtocolViolation(
                f"reward {snippet(repr(self.value))} is not a valid {self.kind} reward"
            )

    @classmethod
    def from_json(cls, value: object) -> Reward:
        """Classify a parsed JSON value; strings, containers and non-finite numbers fail."""
        if cls is Reward:
            kind = type(value)
            if kind is int or kind is bool or value is None:
                known = _COMMON_REWARDS.get((kind, value))
                if known is not None:
                    return known
        if value is None:
            return cls("null", None)
        if isinstance(value, bool):
            return cls("bool", value)
        if type(value) is int:
            if _I64_MIN <= value <= _I64_MAX:
                return cls("integer", value)
            try:
                return cls("float", float(value))
            except OverflowError:
                raise ProtocolViolation("integer reward overflows a float") from None
        if type(value) is float:
            return cls("float", value)
        raise ProtocolViolation(
            f"reward must be null, a boolean or a number, not {type(value).__name__}"
        )

    @property
    def training_value(self) -> float:
        """The scalar a trainer sees: null 0.0, false 0.0, true 1.0, numbers as floats."""
        if self.value is None:
            return 0.0
        return float(self.value)

    def to_json(self) -> bool | int | float | None:
        return self.value


# null, the booleans and small integers, built once: a Reward is immutable, so one shared
# instance is the same value as a fresh one (the tag is part of the key: 1 is not true).
_COMMON_REWARDS: dict[tuple[type, object], Reward] = {
    (type(None), None): Reward("null", None),
    (bool, False): Reward("bool", False),
    (bool, True): Reward("bool", True),
    **{(int, number): Reward("integer", number) for number in range(-16, 257)},
}


@dataclass(frozen=True, slots=True)
class Observation:
    """A ``type: observation`` reply; ``observation`` and ``metadata`` are untrusted data."""

    observation: dict[str, Any]
    reward: Reward
    done: bool
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StateResult:
    """A ``type: state`` reply; ``data`` is any JSON value the environment chose."""

    data: Any


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """A ``type: error`` reply with one of the seven codes; the message is cut to a bound."""

    code: ErrorCode
    message: str
    errors: list[Any] | None = None
    active_sessions: int | None = None
    max_sessions: int | None = None
    factory_name: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.code.is_terminal

    @property
    def recoverable(self) -> bool:
        return not self.code.is_terminal

    def describe(self) -> str:
        """One line for error messages: code plus the (quoted, bounded) server message."""
        return f"{self.code.value}: {snippet(self.message)}"


ServerFrame = Observation | StateResult | ProtocolError


class RequestKind(enum.StrEnum):
    """The requests that expect a reply (``close`` has none)."""

    RESET = "reset"
    STEP = "step"
    STATE = "state"


# --- encoding -------------------------------------------------------------------------------


def _encode(frame: dict[str, Any]) -> str:
    data = dumps_compact(frame)
    if len(data) > MAX_CLIENT_FRAME_BYTES:
        raise LimitExceeded(
            "client frame",
            limit="MAX_CLIENT_FRAME_BYTES",
            bound=MAX_CLIENT_FRAME_BYTES,
            observed=len(data),
        )
    return data.decode("utf-8")


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ProtocolViolation(f"{what} must be a JSON object, not {type(value).__name__}")
    return dict(value)


def encode_reset(data: Mapping[str, Any] | None = None) -> str:
    """``{"type":"reset"}`` or ``{"type":"reset","data":{...}}`` as compact JSON text."""
    if data is None:
        return _encode({"type": "reset"})
    return _encode({"type": "reset", "data": _object(data, "reset data")})


def encode_step(action: Mapping[str, Any]) -> str:
    """``{"type":"step","data":<action>}``; the action must be an object (OpenEnv requires it)."""
    return _encode({"type": "step", "data": _object(action, "step action")})


def encode_state() -> str:
    return '{"type":"state"}'


def encode_close() -> str:
    return '{"type":"close"}'


# --- decoding -------------------------------------------------------------------------------


def decode_server_frame(text: str | bytes) -> ServerFrame:
    """Parse one server text frame (at most ``MAX_SERVER_FRAME_BYTES``) into a typed reply.

    Raises only :class:`~kiln_verify.errors.ProtocolViolation`: oversized, non-JSON,
    non-object, unknown ``type``, unknown error code, or a malformed ``data``.
    """
    frame = _canonical_frame(text)
    if frame is None:
        frame = _strict_frame(text)
    return _classify(frame)


def parse_server_frame(text: str | bytes) -> dict[str, Any]:
    """The first half of :func:`decode_server_frame`: the frame's JSON object, unread.

    A client holding a credential looks at every decoded string between the halves,
    before :func:`classify_server_frame` can quote one in an error message.
    """
    frame = _canonical_frame(text)
    if frame is None:
        frame = _strict_frame(text)
    return frame


def classify_server_frame(frame: dict[str, Any]) -> ServerFrame:
    """The second half of :func:`decode_server_frame`: the typed reply of a parsed frame."""
    return _classify(frame)


_SPACED = b'{"type": '


def _canonical_frame(text: str | bytes) -> dict[str, Any] | None:
    """The frame's object when its bytes are exactly ``orjson``'s spelling of it, else None.

    :func:`~kiln_verify.core.jsonfast.canonical_value` proves that value equal to the
    strict parser's (``loads`` tries it first for ``bytes``; frames arrive as ``str``).
    A ``str`` that encodes to at most ``MAX_SERVER_FRAME_BYTES`` bytes passes every check
    ``loads`` makes before parsing (the length, no lone surrogate since it encodes, no
    byte order mark since ``orjson`` refuses one), so the strict route is only needed for
    everything else, and it alone decides errors. ``bytes`` go straight to ``loads``,
    which tries the same tier first. Python's default spelling (``{"type": ...``, as
    openenv's servers write) can never match and skips the attempt.
    """
    if type(text) is not str:
        return None
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if len(raw) > MAX_SERVER_FRAME_BYTES or raw.startswith(_SPACED):
        return None
    value = canonical_value(raw, MAX_JSON_DEPTH)
    if value is MISS or type(value) is not dict:
        return None
    result: dict[str, Any] = value
    return result


def _strict_frame(text: str | bytes) -> dict[str, Any]:
    try:
        return loads_object(text, max_bytes=MAX_SERVER_FRAME_BYTES)
    except LimitExceeded as exc:
        raise ProtocolViolation(
            f"server frame exceeds MAX_SERVER_FRAME_BYTES = {MAX_SERVER_FRAME_BYTES}"
        ) from exc
    except KilnError as exc:
        raise ProtocolViolation(f"server frame is not a strict JSON object ({exc.code})") from exc


def _classify(frame: dict[str, Any]) -> ServerFrame:
    kind = frame.get("type")
    if not (len(frame) == 2 and "data" in frame and "type" in frame):  # else: which rule
        if set(frame) - {"type", "data"}:
            extra = sorted(set(frame) - {"type", "data"})
            raise ProtocolViolation(f"server frame has unknown top-level keys {snippet(extra)}")
        if "data" not in frame:
            raise ProtocolViolation(f"server frame of type {snippet(kind)} has no data")
    data = frame["data"]
    if kind == "observation":
        return _observation(data)
    if kind == "state":
        return StateResult(data)
    if kind == "error":
        return _error(data)
    raise ProtocolViolation(f"unknown server frame type {snippet(kind)}")


_OBSERVATION_KEYS = frozenset({"observation", "reward", "done", "metadata"})


def _observation(data: object) -> Observation:
    if not isinstance(data, dict):
        raise ProtocolViolation("observation data must be an object")
    unknown = set(data) - _OBSERVATION_KEYS
    if unknown:
        raise ProtocolViolation(f"observation data has unknown keys {snippet(sorted(unknown))}")
    for key in ("observation", "reward", "done"):
        if key not in data:
            raise ProtocolViolation(f"observation data lacks {key!r}")
    observation = data["observation"]
    if not isinstance(observation, dict):
        raise ProtocolViolation("observation.observation must be an object")
    done = data["done"]
    if not isinstance(done, bool):
        raise ProtocolViolation("observation.done must be a boolean")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ProtocolViolation("observation.metadata must be an object or null")
    return Observation(observation, Reward.from_json(data["reward"]), done, metadata)


def _optional_int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if type(value) is not int:
        raise ProtocolViolation(f"error.{key} must be an integer")
    return value


def _error(data: object) -> ProtocolError:
    if not isinstance(data, dict):
        raise ProtocolViolation("error data must be an object")
    raw_code = data.get("code")
    try:
        code = ErrorCode(raw_code) if isinstance(raw_code, str) else None
    except ValueError:
        code = None
    if code is None:
        raise ProtocolViolation(f"unknown error code {snippet(raw_code)}")
    message = data.get("message")
    if not isinstance(message, str):
        raise ProtocolViolation("error.message must be a string")
    errors = data.get("errors")
    if errors is not None and not isinstance(errors, list):
        raise ProtocolViolation("error.errors must be a list")
    factory = data.get("factory_name")
    if factory is not None and not isinstance(factory, str):
        raise ProtocolViolation("error.factory_name must be a string")
    return ProtocolError(
        code,
        message[:MAX_PROTOCOL_MESSAGE_CHARS],
        errors,
        _optional_int(data, "active_sessions"),
        _optional_int(data, "max_sessions"),
        factory,
    )


_EXPECTED: dict[RequestKind, tuple[type[ServerFrame], ...]] = {
    RequestKind.RESET: (ProtocolError, Observation),
    RequestKind.STEP: (ProtocolError, Observation),
    RequestKind.STATE: (ProtocolError, StateResult),
}


def check_response(request: RequestKind, frame: ServerFrame) -> ServerFrame:
    """Reset/step expect an observation, state expects state; errors answer anything.

    A frame of any other type raises :class:`~kiln_verify.errors.UnexpectedResponse`,
    which poisons the session: without request ids, a reply of the wrong type means the
    client and server no longer agree on which answer belongs to which request.
    """
    if isinstance(frame, _EXPECTED[request]):
        return frame
    got = "observation" if isinstance(frame, Observation) else "state"
    raise UnexpectedResponse(f"{request.value} was answered with a {got} frame")
