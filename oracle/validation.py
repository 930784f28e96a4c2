"""Validation errors in pydantic's `e.errors()` shape, without pydantic.

An OpenEnv server validates the WebSocket envelope (`WS*Message`, `extra="forbid"`), the
action (`ActionCls.model_validate`, extra forbidden, a `metadata` dict first) and the HTTP
bodies (FastAPI request models) with pydantic, and sends the resulting error list to the
client. Clients display and sometimes match these lists, so the oracle produces the same
`type`/`loc`/`msg`/`input`/`ctx`/`url` entries in the same order: declared fields in
declaration order, then one `extra_forbidden` per unknown key in input order.

The oracle's action fields behave like pydantic `StrictInt`/`StrictStr` fields: `true`,
`5.0` and `"5"` are not integers (see `oracle/README.md`, "Wire behaviour"). The HTTP
request models keep pydantic's lax coercion, exactly as OpenEnv's `ResetRequest` does.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oracle.base import ActionField

ErrorItem = dict[str, Any]
Loc = tuple[str | int, ...]

#: The pydantic release OpenEnv 0.10.0 runs on here; its error URLs name it.
PYDANTIC_ERRORS_URL = "https://errors.pydantic.dev/2.14/v/"

_MESSAGES: Mapping[str, str] = {
    "missing": "Field required",
    "extra_forbidden": "Extra inputs are not permitted",
    "dict_type": "Input should be a valid dictionary",
    "int_type": "Input should be a valid integer",
    "int_parsing": "Input should be a valid integer, unable to parse string as an integer",
    "int_from_float": "Input should be a valid integer, got a number with a fractional part",
    "int_parsing_size": "Unable to parse input string as an integer, exceeded maximum size",
    "float_type": "Input should be a valid number",
    "float_parsing": "Input should be a valid number, unable to parse string as a number",
    "finite_number": "Input should be a finite number",
    "string_type": "Input should be a valid string",
    "model_attributes_type": (
        "Input should be a valid dictionary or object to extract fields from"
    ),
    "json_invalid": "JSON decode error",
}
#: pydantic-core's lax integer text: ASCII digits with single underscores between them,
#: inside Unicode White_Space (Rust's `trim`; Python's `\s` would also take U+001C..U+001F).
_SPACE = "[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"
_INT_TEXT = re.compile(_SPACE + "[+-]?[0-9]+(?:_[0-9]+)*" + _SPACE)
_I64_BOUND = float(2**63)


def short_repr(value: Any) -> str:
    """pydantic's `input_value`: the repr, cut to 50 UTF-8 bytes around an ellipsis."""
    try:
        text = repr(value)
    except RecursionError:
        text = "..."
    raw = text.encode("utf-8", errors="surrogatepass")
    if len(raw) <= 50:
        return text
    # pydantic-core cuts bytes, keeping whole characters on both sides of the ellipsis
    head = raw[:25].decode("utf-8", errors="ignore")
    tail = raw[-24:].decode("utf-8", errors="ignore")
    return f"{head}...{tail}"


def pydantic_text(title: str, errors: Sequence[tuple[str, str, str, Any]]) -> str:
    """`str(ValidationError)` as pydantic 2 writes it; `errors` are (loc, type, msg, input)."""
    count = len(errors)
    lines = [f"{count} validation error{'s' if count != 1 else ''} for {title}"]
    for loc, kind, msg, value in errors:
        lines.append(loc)
        lines.append(f"  {msg} [type={kind}, input_value={short_repr(value)}, "
                     f"input_type={type(value).__name__}]")
        lines.append(f"    For further information visit {PYDANTIC_ERRORS_URL}{kind}")
    return "\n".join(lines)


def error(kind: str, loc: Loc, value: Any, *, url: bool, msg: str | None = None,
          ctx: Mapping[str, Any] | None = None) -> ErrorItem:
    """One entry; FastAPI strips `url` from request-body errors, WebSocket replies keep it."""
    item: ErrorItem = {"type": kind, "loc": list(loc), "msg": msg or _MESSAGES[kind],
                       "input": value}
    if ctx is not None:
        item["ctx"] = dict(ctx)
    if url:
        item["url"] = PYDANTIC_ERRORS_URL + kind
    return item


def extras(message: Mapping[str, Any], known: Iterable[str], loc: Loc, *,
           url: bool) -> list[ErrorItem]:
    allowed = set(known)
    return [error("extra_forbidden", (*loc, key), value, url=url)
            for key, value in message.items() if key not in allowed]


# -- WebSocket ------------------------------------------------------------------------------

def envelope_errors(message: Mapping[str, Any], *, data: str) -> list[ErrorItem]:
    """`WS*Message` validation; `data` is "required", "optional" or "forbidden"."""
    errors: list[ErrorItem] = []
    if data == "forbidden":
        return extras(message, ("type",), (), url=True)
    if "data" not in message:
        if data == "required":
            errors.append(error("missing", ("data",), dict(message), url=True))
    elif not isinstance(message["data"], dict):
        errors.append(error("dict_type", ("data",), message["data"], url=True))
    errors.extend(extras(message, ("type", "data"), (), url=True))
    return errors


def action_errors(fields: Sequence[ActionField], action: Mapping[str, Any]) -> list[ErrorItem]:
    """`ActionCls.model_validate(action)` with strict field types, as a list of errors."""
    errors: list[ErrorItem] = []
    if "metadata" in action and not isinstance(action["metadata"], dict):
        errors.append(error("dict_type", ("metadata",), action["metadata"], url=True))
    for field in fields:
        if field.name not in action:
            if field.required:
                errors.append(error("missing", (field.name,), dict(action), url=True))
            continue
        value = action[field.name]
        if value is None and not field.required:
            continue
        if field.type == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                errors.append(error("int_type", (field.name,), value, url=True))
        elif not isinstance(value, str):
            errors.append(error("string_type", (field.name,), value, url=True))
    errors.extend(extras(action, ("metadata", *(f.name for f in fields)), (), url=True))
    return errors


def check_mcp_discriminator(action: Mapping[str, Any]) -> None:
    """OpenEnv looks `action["type"]` up among its MCP action types before validating any
    action, so an unhashable `type` raises `TypeError` there (EXECUTION_ERROR over a
    WebSocket, a 500 over HTTP) whatever the environment."""
    kind = action.get("type")
    if isinstance(kind, list | dict):
        raise TypeError(f"unhashable type: '{type(kind).__name__}'")


def tool_action_errors(action: Mapping[str, Any]) -> list[ErrorItem]:
    """OpenEnv's `ListToolsAction` (`type: "list_tools"`) or `CallToolAction` validation."""
    errors: list[ErrorItem] = []
    if "metadata" in action and not isinstance(action["metadata"], dict):
        errors.append(error("dict_type", ("metadata",), action["metadata"], url=True))
    if action.get("type") == "list_tools":
        errors.extend(extras(action, ("metadata", "type"), (), url=True))
        return errors
    if "type" in action and action["type"] != "call_tool":
        errors.append(error("literal_error", ("type",), action["type"], url=True,
                            msg="Input should be 'call_tool'", ctx={"expected": "'call_tool'"}))
    if "tool_name" not in action:
        errors.append(error("missing", ("tool_name",), dict(action), url=True))
    elif not isinstance(action["tool_name"], str):
        errors.append(error("string_type", ("tool_name",), action["tool_name"], url=True))
    if "arguments" in action and not isinstance(action["arguments"], dict):
        errors.append(error("dict_type", ("arguments",), action["arguments"], url=True))
    errors.extend(extras(action, ("metadata", "type", "tool_name", "arguments"), (), url=True))
    return errors


# -- HTTP request bodies (FastAPI: `loc` starts with "body", no `url`) ----------------------

def lax_int(value: Any, loc: Loc, errors: list[ErrorItem], *, url: bool = False) -> Any:
    """pydantic's lax `int`: bools, integral floats and digit strings are accepted.

    A float must lie strictly between -2**63 and 2**63 (pydantic-core converts it to an
    i64), and a digit string must convert under Python's integer-string limit (4,300
    digits); beyond either pydantic answers `int_parsing_size`, so a seed of `1e308`
    is a 422 as on OpenEnv, not a 500."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            errors.append(error("finite_number", loc, value, url=url))
        elif not -_I64_BOUND < value < _I64_BOUND:
            errors.append(error("int_parsing_size", loc, value, url=url))
        elif value.is_integer():
            return int(value)
        else:
            errors.append(error("int_from_float", loc, value, url=url))
    elif isinstance(value, str):
        if _INT_TEXT.fullmatch(value):
            try:
                return int(value.strip().replace("_", ""))
            except ValueError:  # more digits than Python converts
                errors.append(error("int_parsing_size", loc, value, url=url))
                return None
        errors.append(error("int_parsing", loc, value, url=url))
    else:
        errors.append(error("int_type", loc, value, url=url))
    return None


def lax_float(value: Any, loc: Loc, errors: list[ErrorItem]) -> Any:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            errors.append(error("float_parsing", loc, value, url=False))
    else:
        errors.append(error("float_type", loc, value, url=False))
    return None


def string(value: Any, loc: Loc, errors: list[ErrorItem], *, max_length: int | None = None,
           url: bool = False) -> Any:
    if not isinstance(value, str):
        errors.append(error("string_type", loc, value, url=url))
        return None
    if max_length is not None and len(value) > max_length:
        errors.append(error(
            "string_too_long", loc, value, url=url, ctx={"max_length": max_length},
            msg=f"String should have at most {max_length} characters"))
    return value


def reset_body_errors(body: Mapping[str, Any]) -> tuple[dict[str, Any], list[ErrorItem]]:
    """OpenEnv's `ResetRequest` (`extra="allow"`): the coerced kwargs and any errors."""
    errors: list[ErrorItem] = []
    kwargs = dict(body)
    seed = body.get("seed")
    if seed is not None:
        number = lax_int(seed, ("body", "seed"), errors)
        if number is not None and number < 0:
            errors.append(error("greater_than_equal", ("body", "seed"), seed, url=False,
                                msg="Input should be greater than or equal to 0",
                                ctx={"ge": 0}))
        kwargs["seed"] = number
    if body.get("episode_id") is not None:
        string(body["episode_id"], ("body", "episode_id"), errors, max_length=255)
    return kwargs, errors


def step_body_errors(body: Mapping[str, Any]) -> list[ErrorItem]:
    """OpenEnv's `StepRequest` (`extra="allow"`): `action` object, `timeout_s` > 0."""
    errors: list[ErrorItem] = []
    if "action" not in body:
        errors.append(error("missing", ("body", "action"), dict(body), url=False))
    elif not isinstance(body["action"], dict):
        errors.append(error("dict_type", ("body", "action"), body["action"], url=False))
    if body.get("timeout_s") is not None:
        timeout = lax_float(body["timeout_s"], ("body", "timeout_s"), errors)
        if timeout is not None and not timeout > 0:
            errors.append(error("greater_than", ("body", "timeout_s"), body["timeout_s"],
                                url=False, msg="Input should be greater than 0",
                                ctx={"gt": 0.0}))
    if body.get("request_id") is not None:
        string(body["request_id"], ("body", "request_id"), errors, max_length=255)
    return errors


def body_not_object(body: Any) -> ErrorItem:
    return error("model_attributes_type", ("body",), body, url=False)


def body_missing() -> ErrorItem:
    return error("missing", ("body",), None, url=False)


def json_invalid(position: int, reason: str) -> ErrorItem:
    return error("json_invalid", ("body", position), {}, url=False, ctx={"error": reason})


class BodyError(Exception):
    """An HTTP request body FastAPI would refuse: status and `detail`."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


#: `read_json_body`'s answer for an empty body.
NO_BODY: Any = object()


def read_json_body(content_type: str | None, body: bytes) -> Any:
    """The body as FastAPI sees it: JSON only under a JSON content type, else raw text."""
    if not body:
        return NO_BODY
    media = (content_type or "").split(";", 1)[0].strip().lower()
    main, _, sub = media.partition("/")
    if main != "application" or not (sub == "json" or sub.endswith("+json")):
        return body.decode("utf-8", errors="replace")
    try:
        return json.loads(body.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise BodyError(422, [json_invalid(exc.pos, exc.msg)]) from None
    except (ValueError, RecursionError):
        # UnicodeDecodeError, and an integer of more than 4,300 digits, which the json
        # module refuses with a plain ValueError: FastAPI answers both with this 400
        raise BodyError(400, "There was an error parsing the body") from None


def object_body(value: Any, *, required: bool) -> dict[str, Any]:
    """A request model's body: an object; `{}` for an absent optional body."""
    if value is NO_BODY:
        if required:
            raise BodyError(422, [body_missing()])
        return {}
    if not isinstance(value, dict):
        raise BodyError(422, [body_not_object(value)])
    return value
