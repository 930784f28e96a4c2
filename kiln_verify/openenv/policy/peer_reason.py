"""A policy server's own reason for refusing a call, made safe to quote in an error.

A status code alone sends the user guessing: ``transformers serve`` answers an over-long
prompt with HTTP 400 and ``{"detail": "The prompt has 1248 tokens, but the model takes at
most 512 ..."}``, and a pinned server an unknown model with ``{"detail": "Server is pinned
to ...; requested ..."}``. So the openai policy reads the first ``MAX_POLICY_ERROR_BODY_BYTES``
of a non-2xx body and quotes what the server says, from wherever servers put it:

- JSON: ``detail`` as a string (FastAPI's ``HTTPException``) or a list of
  ``{"loc", "msg"}`` items (FastAPI's validation errors, shown as ``loc: msg``, never their
  ``input``), else ``error.message`` (OpenAI, vLLM), ``error`` as a string, ``message``,
  else the document itself, compact;
- HTML (a proxy's error page): its ``<title>``, else its visible text;
- any other UTF-8 text: the text, whitespace runs folded;
- anything else (binary, gzip the server sent unasked): only its size.

The body is a hostile peer's: what is quoted is cut to ``MAX_PEER_REASON_CHARS``,
``repr``-quoted (control characters, escape sequences and bidi overrides arrive escaped,
never raw on a terminal), and scrubbed of the API key in every spelling a reader could undo
(:meth:`BearerToken.scrub <kiln_verify.openenv.protocol.credentials.BearerToken.scrub>`): the key is
cut out before the text is cut to length, so no prefix of it survives at the edge, and a
text that still spells it after that is withheld whole.
"""

from __future__ import annotations

import asyncio
import codecs
import html
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx
import orjson

from kiln_verify.core.jsonio import loads
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_PEER_REASON_CHARS, MAX_POLICY_ERROR_BODY_BYTES
from kiln_verify.openenv.protocol.credentials import BearerToken

__all__ = ["PeerReason", "json_reason", "read_peer_reason", "read_reason", "status_hint"]

Form = Literal["said", "html", "binary", "empty", "withheld", "unread"]

_TITLE: Final = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_INVISIBLE: Final = re.compile(
    r"<(script|style|head)\b[^>]*>.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL
)
_TAG: Final = re.compile(r"<[^>]*>")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BINARY_CONTROL_SHARE: Final = 0.1


@dataclass(frozen=True, slots=True)
class PeerReason:
    """What a non-2xx body said, already scrubbed: ``text`` is quoted only for ``said``
    and ``html``; ``size`` counts the bytes read, ``complete`` whether that was all."""

    form: Form
    text: str = ""
    size: int = 0
    complete: bool = True
    env_name: str = ""

    @classmethod
    def unread(cls) -> PeerReason:
        return cls("unread")

    def render(self) -> str:
        """The words that follow ``answered HTTP <status>`` in the error message."""
        if self.form == "said":
            return f": the server says {self._quoted()}"
        if self.form == "html":
            return f" with an HTML page: {self._quoted()}"
        if self.form == "binary":
            return f" with a binary body of {self._size()}"
        if self.form == "empty":
            return " and no reason in its body"
        if self.form == "withheld":
            return (
                f" with a body that echoes the API key from {self.env_name}; "
                "the server's reason is withheld"
            )
        return " and its body did not arrive in time"

    def _size(self) -> str:
        if self.complete:
            return f"{self.size} bytes"
        return f"more than {MAX_POLICY_ERROR_BODY_BYTES} bytes"

    def _quoted(self) -> str:
        text = self.text
        if len(text) <= MAX_PEER_REASON_CHARS and self.complete:
            return repr(text)
        total = f"{len(text)} chars" if self.complete else f"a body over {self._size()}"
        return repr(text[:MAX_PEER_REASON_CHARS]) + f"... ({total})"


def _decode_text(body: bytes, complete: bool) -> str | None:
    """The body as UTF-8 text, or ``None`` for binary. A read cut mid-character keeps the
    characters before the cut; NULs or many control characters mean binary."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        text: str = decoder.decode(body, final=complete)
    except UnicodeDecodeError:
        return None
    if "\x00" in text or len(_CONTROL.findall(text)) > _BINARY_CONTROL_SHARE * len(text):
        return None
    return text


def _validation_item(item: Any) -> str:
    message = item.get("msg") if isinstance(item, dict) else None
    if not isinstance(message, str):
        return _compact(item)
    loc = item.get("loc")
    if isinstance(loc, list) and loc:
        return ".".join(str(part) for part in loc) + ": " + message
    return message


def _compact(value: Any) -> str:
    try:
        return orjson.dumps(value).decode("utf-8")
    except (orjson.JSONEncodeError, RecursionError):
        return repr(value)


def json_reason(document: Any) -> str:
    """The server's words in a JSON error document (the module docstring's order); empty
    for an empty object or array, which say nothing."""
    if document in ({}, []):
        return ""
    if isinstance(document, dict):
        detail = document.get("detail")
        if isinstance(detail, str) and detail.strip():
            return detail
        if isinstance(detail, list) and detail:
            return "; ".join(_validation_item(item) for item in detail)
        error = document.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str) and error.strip():
            return error
        message = document.get("message")
        if isinstance(message, str) and message.strip():
            return message
        if detail is not None:
            return _compact(detail)
    return _compact(document)


def _html_reason(text: str) -> str:
    title = _TITLE.search(text)
    if title is not None and title.group(1).strip():
        return html.unescape(_TAG.sub(" ", title.group(1)))
    return html.unescape(_TAG.sub(" ", _INVISIBLE.sub(" ", text)))


def _is_html(text: str, content_type: str) -> bool:
    if "html" in content_type.lower():
        return True
    head = text.lstrip()[:64].lower()
    return head.startswith(("<!doctype html", "<html"))


def read_peer_reason(
    body: bytes, *, content_type: str, complete: bool, token: BearerToken | None
) -> PeerReason:
    """Classify and scrub the first bytes of a non-2xx body (see the module docstring)."""
    size = len(body)
    if size == 0:
        return PeerReason("empty")
    text = _decode_text(body, complete)
    if text is None:
        return PeerReason("binary", size=size, complete=complete)
    form: Form = "said"
    reason: str | None = None
    if complete and text.lstrip()[:1] in ("{", "["):
        try:
            reason = json_reason(loads(body, max_bytes=MAX_POLICY_ERROR_BODY_BYTES))
        except KilnError:
            reason = None
    if reason is None:
        if _is_html(text, content_type):
            form, reason = "html", _html_reason(text)
        else:
            reason = text
    reason = " ".join(reason.split())
    if not reason:
        return PeerReason("empty", size=size, complete=complete)
    if token is not None:
        scrubbed = token.scrub(reason)
        if scrubbed is None:
            return PeerReason("withheld", size=size, complete=complete, env_name=token.env_name)
        reason = scrubbed
    return PeerReason(form, reason, size=size, complete=complete)


async def read_reason(
    response: httpx.Response, token: BearerToken | None, *, timeout_s: float
) -> PeerReason:
    """The server's reason in the first ``MAX_POLICY_ERROR_BODY_BYTES`` of a non-2xx
    body, waited for at most ``timeout_s`` (the status alone is reported when the body
    stalls or breaks); the rest of the body is never read. ``asyncio.timeout`` keeps the
    read in the caller's task, where httpx's pool locks were taken."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in response.aiter_raw():
                chunks.append(chunk[: MAX_POLICY_ERROR_BODY_BYTES - size])
                size += len(chunk)
                if size > MAX_POLICY_ERROR_BODY_BYTES:
                    break
    except (TimeoutError, httpx.HTTPError):
        return PeerReason.unread()
    return read_peer_reason(
        b"".join(chunks),
        content_type=response.headers.get("content-type", ""),
        complete=size <= MAX_POLICY_ERROR_BODY_BYTES,
        token=token,
    )


_CONTEXT_WORDS: Final = ("prompt", "context", "too long", "max_model_len", "max-model-len")
_TEMPLATE_WORDS: Final = ("chat_template_kwargs", "unexpected field", "extra_forbidden")


def status_hint(status: int, reason: PeerReason | None = None) -> str:
    """The fix for a status, narrowed by the server's own words where they name it (the
    words are in the message; the hint must never contradict them)."""
    said = reason.text.lower() if reason is not None else ""
    if status in (401, 403):
        return "the server refused the API key: check --policy-option api_key_env=VAR"
    if status == 404:
        return "check base_url (it includes the API prefix, e.g. http://127.0.0.1:8000/v1)"
    if status in (400, 413, 422) and "token" in said and any(w in said for w in _CONTEXT_WORDS):
        return (
            "the conversation no longer fits the model's context: lower --max-steps or "
            "--max-action-tokens, or serve the model with a longer context"
        )
    if status in (400, 422) and any(word in said for word in _TEMPLATE_WORDS):
        return "pass --policy-option template_kwargs=false to this server"
    if status in (400, 422):
        return (
            "read the server's reason: check model=NAME (the id the server serves), or pass "
            "--policy-option template_kwargs=false to servers that reject chat_template_kwargs"
        )
    if status >= 500:
        return "the inference server failed; see its log"
    return "check base_url and the server's log"
