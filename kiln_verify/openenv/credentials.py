"""Bearer credentials: read once from a named environment variable, never shown.

The token lives only inside a :class:`BearerToken`, whose ``repr``/``str`` are redacted,
so it cannot reach a log line, an error message, a report or an identity record by
accident. Servers are untrusted: any response that contains the raw token is rejected
before it is parsed (:func:`check_reflection`), because a server that echoes credentials
would otherwise leak them into recorded observations.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from kiln_verify.errors import CredentialInsecure, CredentialInvalid, CredentialReflected
from kiln_verify.limits import MAX_CREDENTIAL_ENV_NAME_CHARS, MAX_CREDENTIAL_TOKEN_BYTES
from kiln_verify.openenv.urls import EnvironmentUrl

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BAD_TOKEN_CHARS = re.compile(r"[\x00-\x20\x7f-\x9f\s]")
REDACTED = "<redacted>"


class BearerToken:
    """A bearer token and the name of the variable it came from; redacted when printed."""

    __slots__ = ("_raw", "_value", "env_name")

    def __init__(self, value: str, env_name: str) -> None:
        self._value = value
        self._raw = value.encode("utf-8")
        self.env_name = env_name

    def __repr__(self) -> str:
        return f"BearerToken(env_name={self.env_name!r}, value={REDACTED})"

    __str__ = __repr__

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header for HTTP requests and the WebSocket upgrade."""
        return {"Authorization": f"Bearer {self._value}"}

    def appears_in(self, data: bytes | str) -> bool:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        return self._raw in raw

    def redact(self, text: str) -> str:
        return text.replace(self._value, REDACTED)


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


def check_reflection(token: BearerToken | None, data: bytes | str, where: str) -> None:
    """Reject a response that contains the raw token, before anything parses it."""
    if token is not None and token.appears_in(data):
        raise CredentialReflected(f"{where} contains the bearer token from {token.env_name}")


def redact(token: BearerToken | None, text: str) -> str:
    """Remove the token from any text about to be shown (error output, reports)."""
    return text if token is None else token.redact(text)
