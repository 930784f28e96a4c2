"""``[openenv]``: the OpenEnv families' section (runs, artifacts, inspection and tasks).

Admission bounds, retention, the environment-origin policy and the credential handles
(``[openenv.credentials.<id>]``: the exact origin a token may be sent to and the variable
that holds it, which must be set when the server starts).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from kiln_verify.control.request import CREDENTIAL_HANDLE_PATTERN
from kiln_verify.control.sections.rules import boolean, fail, integer, known_keys, table
from kiln_verify.errors import KilnError
from kiln_verify.limits import (
    MAX_SERVER_ACTIVE_RUNS,
    MAX_SERVER_CREDENTIALS,
    MAX_SERVER_TRACKED_RUNS,
    MAX_SERVER_TTL_S,
)
from kiln_verify.openenv.protocol.credentials import validate_env_name
from kiln_verify.openenv.protocol.urls import normalize_base_url

__all__ = ["CredentialHandle", "OpenEnvSettings", "origin_of", "parse_openenv"]

_HANDLE = re.compile(CREDENTIAL_HANDLE_PATTERN)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_KEYS: Final = {
    "enabled",
    "max_active_runs",
    "max_tracked_runs",
    "tracked_run_ttl_secs",
    "allow_remote_environments",
    "credentials",
}


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a base URL, without a default port (80/443)."""
    parts = urlsplit(normalize_base_url(url).base_url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None and parts.port != _DEFAULT_PORTS[parts.scheme]:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}"


@dataclasses.dataclass(frozen=True, slots=True)
class CredentialHandle:
    """``[openenv.credentials.<id>]``: the exact origin it may be sent to and its variable."""

    origin: str
    bearer_token_env: str


@dataclasses.dataclass(frozen=True, slots=True)
class OpenEnvSettings:
    """``[openenv]``: admission bounds, retention and the environment-origin policy."""

    enabled: bool = True
    max_active_runs: int = 4
    max_tracked_runs: int = 128
    tracked_run_ttl_secs: int = 604800
    allow_remote_environments: bool = False
    credentials: Mapping[str, CredentialHandle] = dataclasses.field(default_factory=dict)


def _credential(
    handle: str, raw: Any, environ: Mapping[str, str], path: str | None
) -> CredentialHandle:
    where = f"[openenv.credentials.{handle[:64]}]"
    if not _HANDLE.fullmatch(handle) or handle == "-":
        raise fail(f"{where}: a handle is 1..64 of A-Z a-z 0-9 _ -", path)
    values = table(raw, where, path)
    known_keys(values, {"origin", "bearer_token_env"}, where, path)
    origin, variable = values.get("origin"), values.get("bearer_token_env")
    if not isinstance(origin, str) or not isinstance(variable, str):
        raise fail(f"{where} needs string keys origin and bearer_token_env", path)
    try:
        parsed = normalize_base_url(origin)
        canonical = origin_of(origin)
        validate_env_name(variable)
    except KilnError as exc:
        raise fail(f"{where}: {exc.rule}", path, hint=exc.hint) from None
    if urlsplit(parsed.base_url).path:
        raise fail(f"{where}.origin must be an origin scheme://host[:port] without a path", path)
    if not parsed.is_https and not parsed.is_loopback:
        raise fail(f"{where}.origin must be https:// (plain http only for loopback hosts)", path)
    if not environ.get(variable, "").strip():
        raise fail(
            f"{where}.bearer_token_env names {variable}, which is unset or empty",
            path,
            hint=f"export {variable} before starting the server",
        )
    return CredentialHandle(canonical, variable)


def parse_openenv(raw: Any, environ: Mapping[str, str], path: str | None) -> OpenEnvSettings:
    """The ``[openenv]`` table (absent: every default)."""
    section = table(raw, "[openenv]", path)
    known_keys(section, _KEYS, "[openenv]", path)
    active = integer(section, "max_active_runs", 4, 1, MAX_SERVER_ACTIVE_RUNS, "[openenv]", path)
    tracked = integer(
        section, "max_tracked_runs", 128, 1, MAX_SERVER_TRACKED_RUNS, "[openenv]", path
    )
    if tracked < active:
        raise fail("[openenv].max_tracked_runs must be at least max_active_runs", path)
    credentials = table(section.get("credentials", {}), "[openenv.credentials]", path)
    if len(credentials) > MAX_SERVER_CREDENTIALS:
        raise fail(f"more than {MAX_SERVER_CREDENTIALS} credential handles", path)
    return OpenEnvSettings(
        enabled=boolean(section, "enabled", True, "[openenv]", path),
        max_active_runs=active,
        max_tracked_runs=tracked,
        tracked_run_ttl_secs=integer(
            section, "tracked_run_ttl_secs", 604800, 1, MAX_SERVER_TTL_S, "[openenv]", path
        ),
        allow_remote_environments=boolean(
            section, "allow_remote_environments", False, "[openenv]", path
        ),
        credentials={h: _credential(h, raw, environ, path) for h, raw in credentials.items()},
    )
