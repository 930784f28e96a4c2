"""What to tell a newcomer whose environment URL does not work.

The three mistakes seen most: ``https://`` to a server that speaks plain HTTP (the TLS
handshake fails on the first byte), a base URL that already ends in ``/ws`` (the client
derives ``/ws`` itself, so every route becomes ``/ws/health``), and a URL that points at
something other than an OpenEnv server (no ``/health``). Each gets its own hint; anything
else gets the generic one of its error class.
"""

from __future__ import annotations

from kiln_verify.openenv.protocol.urls import EnvironmentUrl

__all__ = ["connection_hint", "status_hint"]

_TLS_MARKERS = ("SSL", "TLS", "WRONG_VERSION_NUMBER", "record layer", "certificate")


def _ws_suffix(url: EnvironmentUrl) -> str | None:
    if url.base_url.rstrip("/").endswith("/ws"):
        base = url.base_url.rstrip("/")[: -len("/ws")]
        return (
            f"the URL ends in /ws, but the client adds /ws itself: give the server's base "
            f"URL ({base})"
        )
    return None


def connection_hint(url: EnvironmentUrl, exc: BaseException) -> str | None:
    """A hint for a connection that failed below HTTP, or ``None`` for the default."""
    text = f"{type(exc).__name__} {exc}"
    if url.is_https and any(marker in text for marker in _TLS_MARKERS):
        plain = "http://" + url.base_url[len("https://") :]
        return (
            f"the TLS handshake failed: if the server speaks plain HTTP, use {plain}; "
            "otherwise check its certificate"
        )
    suffix = _ws_suffix(url)
    if suffix is not None:
        return suffix
    return f"check that an OpenEnv server is running at {url.base_url} and reachable from here"


def status_hint(url: EnvironmentUrl, path: str, status: int) -> str | None:
    """A hint for an unexpected HTTP status on ``path``, or ``None`` for the default."""
    suffix = _ws_suffix(url)
    if suffix is not None and status == 404:
        return suffix
    if status == 404 and path == "/health":
        return (
            f"{url.base_url} has no /health route: this does not look like an OpenEnv server "
            "(check the host, port and any path prefix)"
        )
    if status in (401, 403):
        return "the server wants a bearer token: pass --credential-env NAME"
    return None
