"""Frame encoding as an OpenEnv 0.10.0 server produces it, with the stdlib `json` only.

OpenEnv serialises every reply with pydantic's `model_dump_json`: compact separators,
non-ASCII characters written raw, and NaN/Infinity written as `null`. `json.dumps` with
`ensure_ascii=False` gives the same bytes for everything an oracle environment produces;
the rare non-finite float (only ever echoed back from a client's own frame) takes a slower
sanitising path. A lone surrogate (legal in JSON, not encodable as UTF-8) cannot be put in
a text frame at all: OpenEnv answers it with `SESSION_ERROR` and so do we.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

INVALID_JSON: Final = "INVALID_JSON"
UNKNOWN_TYPE: Final = "UNKNOWN_TYPE"
VALIDATION_ERROR: Final = "VALIDATION_ERROR"
EXECUTION_ERROR: Final = "EXECUTION_ERROR"
CAPACITY_REACHED: Final = "CAPACITY_REACHED"
FACTORY_ERROR: Final = "FACTORY_ERROR"
SESSION_ERROR: Final = "SESSION_ERROR"

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class UnencodableFrame(Exception):
    """A reply that cannot travel in a text frame; `str(exc)` is OpenEnv's message for it."""


def dumps(value: Any) -> str:
    """Compact JSON text in pydantic's style; raises `UnencodableFrame` for lone surrogates."""
    try:
        text = _encode(value)
    except ValueError:
        text = _encode(_finite(value))
    except RecursionError as exc:
        raise UnencodableFrame(str(exc)) from None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise UnencodableFrame(_surrogate_message(value)) from None
    return text


def dumps_bytes(value: Any) -> bytes:
    """`dumps` as UTF-8 bytes, for HTTP bodies and precomputed documents."""
    return dumps(value).encode("utf-8")


def observation_frame(observation: Mapping[str, Any], reward: Any, done: bool) -> dict[str, Any]:
    """`{"type":"observation",...}`; OpenEnv 0.10.0 keeps `metadata` inside the observation."""
    return {
        "type": "observation",
        "data": {"observation": observation_body(observation), "reward": reward, "done": done},
    }


def observation_body(observation: Mapping[str, Any]) -> dict[str, Any]:
    """The wire observation: `metadata` first (the Observation base field), then the env's."""
    body: dict[str, Any] = {"metadata": {}}
    body.update(observation)
    return body


def error_frame(code: str, message: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"message": message, "code": code}
    data.update(extra)
    return {"type": "error", "data": data}


def _finite(value: Any) -> Any:
    """A copy with every non-finite float replaced by None, as pydantic serialises them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _surrogate_message(value: Any) -> str:
    """OpenEnv's text: pydantic fails on the first string it cannot encode, alone."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"Error serializing to JSON: UnicodeEncodeError: {exc}"
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                stack.append(child)
                stack.append(key)
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return "Error serializing to JSON: UnicodeEncodeError"
