"""The exact text shown to the model (kiln-openenv-contract §3.1, §5.4, §5.5).

The offline verifier recomputes the shared prompt and every observation segment from the
recorded inspection and observations and requires byte equality, so the collector and the
verifier must build this text with the same functions: these. Kiln's own system-prompt
wording was not available (§18); :data:`SYSTEM_TEMPLATE` is ours and is pinned byte for
byte by ``tests/openenv/records/test_prompt.py``. See docs/contract.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from kiln_verify.core.jsonenc import parsed_text
from kiln_verify.core.jsonio import dumps_compact, loads
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_CLIENT_FRAME_BYTES
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.records import ChatMessage, TurnSegment, sort_keys

__all__ = [
    "HARNESS_CODES",
    "NO_OUTPUT_MESSAGE",
    "OBSERVATION_TEMPLATE",
    "SYSTEM_TEMPLATE",
    "THINK_CLOSE",
    "ActionRules",
    "ModelReply",
    "action_content",
    "harness_error_content",
    "initial_messages",
    "judge_model_reply",
    "observation_content",
    "observation_json_text",
    "parse_model_action",
    "protocol_error_content",
    "protocol_error_json_text",
    "recorded_reply",
    "rust_debug_str",
    "system_prompt",
]

THINK_CLOSE: Final = "</think>"
_FENCE: Final = "```"
HARNESS_CODES: Final = (
    "INVALID_MODEL_ACTION",
    "ACTION_SCHEMA_VALIDATION_FAILED",
    "MODEL_ACTION_NO_OUTPUT",
)
NO_OUTPUT_MESSAGE: Final = "the model produced no final content"

SYSTEM_TEMPLATE: Final = (
    "You are the policy acting in the OpenEnv reinforcement-learning environment {name}.\n"
    "Environment description: {description}\n"
    "On every turn reply with exactly one JSON object that validates against this action "
    "JSON Schema:\n"
    "{action_schema}\n"
    "Reply with the JSON object only: no Markdown, no commentary, no code fences.\n"
    "When an observation carries a non-empty input_text, that text is pasted verbatim as "
    "your decision prompt; otherwise the full observation follows as JSON."
)
"""Our system prompt; ``{name}`` is Rust-Debug-quoted, ``{action_schema}`` compact JSON."""

OBSERVATION_TEMPLATE: Final = (
    "OpenEnv {label} (observation, reward, done, and optional metadata JSON):\n{json}"
)

ObservationLabel = Literal["reset result", "step result"]


def rust_debug_str(text: str) -> str:
    """``format!("{:?}", text)`` for a Rust ``&str``: double quotes and Rust's escapes.

    ``\\t \\r \\n \\\\ \\" \\'``-style escapes as Rust writes them (``'`` is not escaped
    inside a string), ``\\0``, other control characters as ``\\u{hex}``; everything else
    (including non-ASCII) raw. Rust also escapes some non-printable Unicode
    (grapheme extenders, unassigned code points); we escape Unicode category Cc only.
    """
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif char == "\0":
            out.append("\\0")
        elif ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F:
            out.append(f"\\u{{{ord(char):x}}}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def system_prompt(inspection: EnvironmentInspection) -> str:
    """The system message for one environment (name, description, compact action schema)."""
    metadata = inspection.identity.metadata
    schema = dumps_compact(sort_keys(inspection.schema_.action)).decode("utf-8")
    return SYSTEM_TEMPLATE.format(
        name=rust_debug_str(metadata.name),
        description=metadata.description,
        action_schema=schema,
    )


def _compact_text(value: Any, parsed: bool) -> str:
    return parsed_text(value) if parsed else dumps_compact(value).decode("utf-8")


def observation_json_text(observation: ObservationRecord) -> str:
    """``dumps_compact(observation.to_json())`` as text, for a record the strict parser
    produced: the members in field order, the free-form parts written canonically (what
    ``to_json``'s recursive key sort gives), ``metadata`` omitted when ``None`` -- without
    pydantic's serializer or the sorted copy (``tests/openenv/records/test_fastpaths.py``)."""
    parts = [
        '{"observation":',
        parsed_text(observation.observation, canonical=True),
        ',"reward":',
        parsed_text(observation.reward.to_json()),
        ',"done":',
        "true" if observation.done else "false",
    ]
    if observation.metadata is not None:
        parts += [',"metadata":', parsed_text(observation.metadata, canonical=True)]
    parts.append("}")
    return "".join(parts)


def observation_content(
    label: ObservationLabel, observation: ObservationRecord, *, parsed: bool = False
) -> str:
    """§5.5: a non-blank ``input_text`` verbatim (untrimmed), else the labelled compact JSON.

    ``parsed``: the record was read by the strict parser (the verifier), so the faster
    :func:`~kiln_verify.core.jsonenc.parsed_text` writes the same text.
    """
    payload = observation.observation
    if isinstance(payload, dict):
        text = payload.get("input_text")
        if isinstance(text, str) and text.strip():
            return text
    if parsed:
        body = observation_json_text(observation)
    else:
        body = dumps_compact(observation.to_json()).decode("utf-8")
    return OBSERVATION_TEMPLATE.format(label=label, json=body)


def initial_messages(
    inspection: EnvironmentInspection,
    reset_observation: ObservationRecord,
    *,
    system: str | None = None,
    parsed: bool = False,
) -> list[ChatMessage]:
    """The shared prompt of a group: system + user(reset result).

    ``system``: :func:`system_prompt` of ``inspection``, when the caller keeps it per
    environment (the verifier); ``parsed`` as for :func:`observation_content`.
    """
    user = observation_content("reset result", reset_observation, parsed=parsed)
    return [
        ChatMessage(role="system", content=system_prompt(inspection) if system is None else system),
        ChatMessage(role="user", content=user),
    ]


def protocol_error_content(
    error: ProtocolErrorRecord, continued: bool, *, parsed: bool = False
) -> str:
    """``{"openenv_error":<error>,"recoverable":continued,"done":!continued}`` compact
    (``parsed`` as for :func:`observation_content`)."""
    if parsed:
        return protocol_error_json_text(error, continued)
    value: dict[str, Any] = {
        "openenv_error": error.to_json(),
        "recoverable": continued,
        "done": not continued,
    }
    return _compact_text(value, parsed)


_CONTINUED: Final = '},"recoverable":true,"done":false}'
_ENDED: Final = '},"recoverable":false,"done":true}'


def protocol_error_json_text(error: ProtocolErrorRecord, continued: bool) -> str:
    """:func:`protocol_error_content` for a record the strict parser produced, assembled
    from its parts like :func:`observation_json_text`: the error's members in field order,
    ``errors`` written canonically (``to_json``'s recursive key sort), absent optional
    members omitted -- without pydantic's serializer
    (``tests/openenv/records/test_fastpaths.py``)."""
    parts = ['{"openenv_error":{"code":', parsed_text(error.code)]
    parts += [',"message":', parsed_text(error.message)]
    if error.errors is not None:
        parts += [',"errors":', parsed_text(error.errors, canonical=True)]
    if error.active_sessions is not None:
        parts += [',"active_sessions":', parsed_text(error.active_sessions)]
    if error.max_sessions is not None:
        parts += [',"max_sessions":', parsed_text(error.max_sessions)]
    if error.factory_name is not None:
        parts += [',"factory_name":', parsed_text(error.factory_name)]
    parts.append(_CONTINUED if continued else _ENDED)
    return "".join(parts)


def harness_error_content(code: str, message: str) -> str:
    """``{"openenv_harness_error":{"code":C,"message":M},"done":true}`` compact."""
    if code not in HARNESS_CODES:
        raise ValueError(f"unknown harness code {code!r}")
    value = {"openenv_harness_error": {"code": code, "message": message}, "done": True}
    return dumps_compact(value).decode("utf-8")


def action_content(content: str, *, thinking: bool, reasoning: str | None = None) -> str:
    """The action segment text: raw content, or ``reasoning + "</think>" + content``."""
    if not thinking:
        return content
    return (reasoning or "") + THINK_CLOSE + content


def observation_segment(label: ObservationLabel, observation: ObservationRecord) -> TurnSegment:
    return TurnSegment.observation(observation_content(label, observation))


def protocol_error_segment(error: ProtocolErrorRecord, continued: bool) -> TurnSegment:
    return TurnSegment.full_warning(protocol_error_content(error, continued))


def harness_error_segment(code: str, message: str) -> TurnSegment:
    return TurnSegment.full_warning(harness_error_content(code, message))


def parse_model_action(
    text: str, *, max_bytes: int = MAX_CLIENT_FRAME_BYTES
) -> dict[str, Any] | str:
    """The action object of a model's final content, or the reason it is not one.

    One rule for the collector (which decides what reaches the wire) and the verifier (which
    re-reads action segments): trim; a leading ```` ``` ```` (optionally tagged
    ``json``/``JSON``) needs a closing fence and is stripped; the rest must be exactly one
    strict JSON value, an object (trailing text is rejected).
    """
    body = text.strip()
    if body.startswith(_FENCE):
        inner = body[len(_FENCE) :]
        if inner.startswith(("json", "JSON")):
            inner = inner[4:]
        if len(body) < 2 * len(_FENCE) or not inner.endswith(_FENCE):
            return "the code fence is not closed"
        body = inner[: -len(_FENCE)].strip()
    try:
        value = loads(body, max_bytes=max_bytes)
    except KilnError as exc:
        return f"the model output is not one JSON object ({exc.code}: {exc.rule})"
    if not isinstance(value, dict):
        return f"the model output is a JSON {type(value).__name__}, not an object"
    return value


class ActionRules(Protocol):
    """The two verdicts :func:`judge_model_reply` needs about one environment's actions:
    :func:`parse_model_action` of an output and the action schema's violation message
    (``ActionSchema.violation``); implementations may remember them per output text."""

    def parse_action(self, output: str) -> dict[str, Any] | str: ...

    def schema_violation(self, output: str, parsed: dict[str, Any]) -> str: ...


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What the collector makes of one model reply: the action segment's text and either
    the action to send or the harness error (code, message) that ends the candidate."""

    text: str
    action: dict[str, Any] | None
    code: str | None = None
    message: str | None = None


def judge_model_reply(
    content: str, reasoning: str | None, *, thinking: bool, rules: ActionRules
) -> ModelReply:
    """The collector's rule for one reply (kiln-openenv-contract §3.1, §5.4), in order:

    * blank final content: ``MODEL_ACTION_NO_OUTPUT``; the segment holds the unfinished
      reasoning without ``</think>`` (thinking on) or the blank content itself (thinking
      off: an action segment is always the raw content then, so it cannot carry text);
    * not one JSON object: ``INVALID_MODEL_ACTION`` with :func:`parse_model_action`'s reason;
    * an object with schema issues: ``ACTION_SCHEMA_VALIDATION_FAILED`` with the schema's
      message; otherwise the action, to be sent.

    The offline verifier applies this same function to what it reads back from a recorded
    tail (:func:`recorded_reply`) and requires the recorded segments to be its output, so a
    relabelled tail, a valid action filed as invalid, or any other message is refused.
    """
    if not content.strip():
        text = (reasoning or "") if thinking else content
        return ModelReply(text, None, "MODEL_ACTION_NO_OUTPUT", NO_OUTPUT_MESSAGE)
    text = action_content(content, thinking=thinking, reasoning=reasoning)
    parsed = rules.parse_action(content)
    if isinstance(parsed, str):
        return ModelReply(text, None, "INVALID_MODEL_ACTION", parsed)
    reason = rules.schema_violation(content, parsed)
    if reason:
        return ModelReply(text, None, "ACTION_SCHEMA_VALIDATION_FAILED", reason)
    return ModelReply(text, parsed)


def recorded_reply(segment: str, *, thinking: bool) -> tuple[str, str | None]:
    """The (content, reasoning) :func:`judge_model_reply` turns into the action segment
    ``segment``: thinking on, the text after the first ``</think>`` (none: a reply with no
    final content, all reasoning); thinking off, the segment itself."""
    if not thinking:
        return segment, None
    reasoning, found, content = segment.partition(THINK_CLOSE)
    return (content, reasoning) if found else ("", segment)
