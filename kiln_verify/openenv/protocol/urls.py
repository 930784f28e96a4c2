"""Base-URL normalization for OpenEnv servers (kiln-openenv-contract §8.1).

One normalized spelling per server matters beyond tidiness: the base URL and the derived
WebSocket URL are part of the environment identity, so ``http://h:1/`` and ``http://h:1``
must not look like two different environments. Anything that could smuggle a second
meaning into a URL (userinfo, query, fragment, whitespace) is refused rather than cleaned.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from kiln_verify.errors import EnvironmentUrlInvalid, snippet
from kiln_verify.limits import MAX_BASE_URL_CHARS

_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")


@dataclass(frozen=True, slots=True)
class EnvironmentUrl:
    """A normalized base URL, its ``/ws`` WebSocket URL and whether it is loopback."""

    base_url: str
    websocket_url: str
    host: str
    is_loopback: bool

    @property
    def is_https(self) -> bool:
        return self.base_url.startswith("https://")

    def join(self, path: str) -> str:
        """``base_url`` + ``path`` (which starts with ``/``), keeping any path prefix."""
        return self.base_url + path


def verifies_tls(url: str) -> bool:
    """httpx's ``verify=`` for a client whose requests all go to ``url`` and that never
    follows a redirect: a plain ``http://`` client never speaks TLS, so it gets no verifying
    context (building one loads the CA bundle: 25-200 ms of CPU per client); any other
    scheme, or text that does not parse, verifies as httpx's default does."""
    try:
        return urlsplit(url).scheme.lower() != "http"
    except ValueError:
        return True


def is_loopback_host(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 and ``::1``; names other than localhost are not resolved."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_base_url(text: str) -> EnvironmentUrl:
    """Trim, default to ``http://``, refuse anything but a plain http(s) origin + path."""
    if not isinstance(text, str):
        raise EnvironmentUrlInvalid("the environment URL must be a string")
    raw = text.strip()
    if not raw:
        raise EnvironmentUrlInvalid("the environment URL is empty")
    if len(raw) > MAX_BASE_URL_CHARS:
        raise EnvironmentUrlInvalid(f"the environment URL is longer than {MAX_BASE_URL_CHARS}")
    if _FORBIDDEN.search(raw):
        raise EnvironmentUrlInvalid(
            f"the environment URL {snippet(raw)} contains whitespace, control characters or '\\'"
        )
    if "://" not in raw:
        raw = "http://" + raw
    scheme = raw.split("://", 1)[0].lower()
    if scheme not in ("http", "https"):
        raise EnvironmentUrlInvalid(f"scheme {snippet(scheme)} is not http or https")
    if "?" in raw:
        raise EnvironmentUrlInvalid("the environment URL must not have a query ('?')")
    if "#" in raw:
        raise EnvironmentUrlInvalid("the environment URL must not have a fragment ('#')")
    parts = urlsplit(raw)
    if "@" in parts.netloc:
        raise EnvironmentUrlInvalid("the environment URL must not contain userinfo ('user@')")
    try:
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise EnvironmentUrlInvalid(
            f"the environment URL has an invalid host or port: {exc}"
        ) from None
    if not host:
        raise EnvironmentUrlInvalid(f"the environment URL {snippet(text)} has no host")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    path = parts.path.rstrip("/")
    base = f"{scheme}://{netloc}{path}"
    ws_scheme = "wss" if scheme == "https" else "ws"
    return EnvironmentUrl(
        base_url=base,
        websocket_url=f"{ws_scheme}://{netloc}{path}/ws",
        host=host,
        is_loopback=is_loopback_host(host),
    )
