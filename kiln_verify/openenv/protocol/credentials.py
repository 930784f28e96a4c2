"""Bearer credentials: read once from a named environment variable, never shown.

The token lives only inside a :class:`BearerToken`, whose ``repr``/``str`` are redacted,
so it cannot reach a log line, an error message, a report or an identity record by
accident. Servers are untrusted: a server that echoes credentials would otherwise leak
them into recorded observations, so every response is refused as
``credential_reflected`` when the token is in it in any spelling that decodes to it
(:func:`read_guarded`): its raw bytes before anything parses it, then every decoded key
and string of the parsed value (:mod:`kiln_verify.openenv.protocol.reflection` says why that is
cheap and complete), and for a document the parser refuses, every decoded string literal
before the parse error (which may quote one) is reported. Header values that reach a
message (a redirect's ``Location``) are checked raw and percent-decoded. Peer text quoted
in an error (a policy server's refusal reason) goes through :meth:`BearerToken.scrub`:
every spelling a reader could undo is cut out, or the text is withheld.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import TypeVar
from urllib.parse import quote, unquote

from kiln_verify.errors import (
    CredentialInsecure,
    CredentialInvalid,
    CredentialReflected,
    KilnError,
)
from kiln_verify.limits import MAX_CREDENTIAL_ENV_NAME_CHARS, MAX_CREDENTIAL_TOKEN_BYTES
from kiln_verify.openenv.protocol.reflection import (
    base64_cores,
    escaped,
    json_spelling,
    reflected_in_literals,
    reflected_in_value,
    spelled_in,
)
from kiln_verify.openenv.protocol.urls import EnvironmentUrl

T = TypeVar("T")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BAD_TOKEN_CHARS = re.compile(r"[\x00-\x20\x7f-\x9f\s]")
REDACTED = "<redacted>"


class BearerToken:
    """A bearer token and the name of the variable it came from; redacted when printed."""

    __slots__ = ("_cores", "_raw", "_spelling", "_value", "env_name")

    def __init__(self, value: str, env_name: str) -> None:
        self._value = value
        self._raw = value.encode("utf-8")
        self._spelling = json_spelling(value)
        self._cores = base64_cores(value)
        self.env_name = env_name

    def __repr__(self) -> str:
        return f"BearerToken(env_name={self.env_name!r}, value={REDACTED})"

    __str__ = __repr__

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header for HTTP requests and the WebSocket upgrade."""
        return {"Authorization": f"Bearer {self._value}"}

    def appears_in(self, data: bytes | str) -> bool:
        """The raw check. For text, searching the text is the same test as searching its
        UTF-8 bytes (UTF-8 is self-synchronizing), without encoding a copy of it."""
        if isinstance(data, str):
            return self._value in data
        return self._raw in data

    def decoded_in(self, data: bytes | str, value: object) -> bool:
        """Whether a decoded key or string of ``value`` (parsed from ``data``, which the raw
        check has passed) contains the token; escape-free ``data`` cannot hide it."""
        return escaped(data) and reflected_in_value(value, self._value, self._spelling)

    def literal_in(self, data: bytes | str) -> bool:
        """Whether an escaped string literal of unparsable ``data`` decodes to the token."""
        return escaped(data) and reflected_in_literals(data, self._value)

    def in_header(self, value: str) -> bool:
        """Raw, or behind any depth of percent-encoding (bounded by the value's length)."""
        for _ in range(len(value) // 3 + 1):
            if self._value in value:
                return True
            decoded = unquote(value, errors="surrogateescape")
            if decoded == value:
                return False
            value = decoded
        return self._value in value

    def redact(self, text: str) -> str:
        return text.replace(self._value, REDACTED)

    def scrub(self, text: str) -> str | None:
        """``text`` with the token cut out wherever it is spelled in a way that can be cut
        out exactly (raw, JSON-escaped as ``orjson`` writes it, percent-encoded, base64),
        or ``None`` when a spelling remains that a reader could still undo (mixed escapes,
        layered encodings): then the whole text must be withheld, never shown in part."""
        spellings = {
            self._value,
            self._spelling.decode("utf-8"),
            quote(self._value, safe=""),
            *self._cores,
        }
        for spelling in sorted(spellings, key=len, reverse=True):
            text = text.replace(spelling, REDACTED)
        return None if spelled_in(text, self._value, self._cores) else text


def validate_env_name(name: str) -> str:
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise CredentialInvalid(
            "the credential variable name must match [A-Za-z_][A-Za-z0-9_]*",
            hint="pass the NAME of an environment variable, never the token itself",
        )
    if len(name) > MAX_CREDENTIAL_ENV_NAME_CHARS:
        raise CredentialInvalid(
            f"the credential variable name is longer than {MAX_CREDENTIAL_ENV_NAME_CHARS}"
        )
    return name


def read_bearer_token(env_name: str, environ: Mapping[str, str] | None = None) -> BearerToken:
    """Read and check the token in ``env_name`` now (client construction), trimmed."""
    validate_env_name(env_name)
    source = os.environ if environ is None else environ
    value = source.get(env_name)
    if value is None:
        raise CredentialInvalid(f"environment variable {env_name} is not set")
    value = value.strip()
    if not value:
        raise CredentialInvalid(f"environment variable {env_name} is empty")
    if _BAD_TOKEN_CHARS.search(value):
        raise CredentialInvalid(
            f"the token in {env_name} contains whitespace or control characters"
        )
    if len(value.encode("utf-8")) > MAX_CREDENTIAL_TOKEN_BYTES:
        raise CredentialInvalid(
            f"the token in {env_name} is longer than {MAX_CREDENTIAL_TOKEN_BYTES} bytes"
        )
    return BearerToken(value, env_name)


def check_transport(token: BearerToken | None, url: EnvironmentUrl) -> None:
    """A token may travel over plain http only to a loopback host."""
    if token is not None and not url.is_https and not url.is_loopback:
        raise CredentialInsecure(
            f"refusing to send the token from {token.env_name} over plain http to a "
            "non-loopback host"
        )


def _reflected(token: BearerToken, where: str, how: str = "") -> CredentialReflected:
    return CredentialReflected(f"{where} contains the bearer token from {token.env_name}{how}")


def check_reflection(token: BearerToken | None, data: bytes | str, where: str) -> None:
    """Reject a response that contains the raw token, before anything parses it."""
    if token is not None and token.appears_in(data):
        raise _reflected(token, where)


def check_body(token: BearerToken | None, data: bytes | str, where: str) -> None:
    """The check for a body that may never be parsed (``/health``, an error status): the
    raw bytes, then every string literal with an escape, decoded."""
    if token is not None:
        if token.appears_in(data):
            raise _reflected(token, where)
        if token.literal_in(data):
            raise _reflected(token, where, " (JSON-escaped)")


def read_guarded(
    token: BearerToken | None, data: bytes | str, where: str, parse: Callable[[bytes | str], T]
) -> T:
    """``parse(data)``, refused as ``credential_reflected`` if the token is in ``data``
    in any spelling: raw (before parsing), in a decoded key or string of the value, or,
    when ``parse`` fails, in a decoded string literal (before its error, which may quote
    one, is raised). Without a token this is just ``parse(data)``."""
    if token is None:
        return parse(data)
    if token.appears_in(data):
        raise _reflected(token, where)
    try:
        value = parse(data)
    except KilnError:
        if token.literal_in(data):
            raise _reflected(token, where, " (JSON-escaped)") from None
        raise
    if token.decoded_in(data, value):
        raise _reflected(token, where, " (JSON-escaped)")
    return value


def check_header(token: BearerToken | None, value: str, where: str) -> None:
    """Reject a header value that is about to be quoted (a redirect's ``Location``) when it
    holds the token, raw or percent-encoded."""
    if token is not None and token.in_header(value):
        raise _reflected(token, where)


def redact(token: BearerToken | None, text: str) -> str:
    """Remove the token from any text about to be shown (error output, reports)."""
    return text if token is None else token.redact(text)
