"""The server configuration: one TOML file (``kiln-verify serve --config``), checked at start.

::

    [server]                       # optional; --host/--port/--state-dir override it
    host = "127.0.0.1"
    port = 8420
    state_dir = "/var/lib/kiln-verify"

    [openenv]                      # the §12 defaults
    enabled = true
    max_active_runs = 4
    max_tracked_runs = 128
    tracked_run_ttl_secs = 604800
    allow_remote_environments = false

    [openenv.credentials.production-arcade]
    origin = "https://arcade.example.com"     # exact origin; https unless loopback
    bearer_token_env = "ARCADE_OPENENV_TOKEN"  # read from the server's environment

    [policies.base]                # the request's adapter selects a policy table
    policy = "random"              # scripted | random | openai | transformers
    options = {}                   # the same KEY = "VALUE" options as --policy-option

Without a file every default applies and adapter ``base`` is the ``random`` policy, so a
newcomer's ``kiln-verify serve`` collects from a loopback oracle at once. Every problem is
a usage error (exit status 2) naming the key and the fix; nothing is half-applied.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from kiln_verify.control.request import BASE_ADAPTER, CREDENTIAL_HANDLE_PATTERN
from kiln_verify.errors import KilnError, UsageError
from kiln_verify.limits import (
    MAX_POLICY_OPTION_BYTES,
    MAX_POLICY_OPTIONS,
    MAX_SERVER_ACTIVE_RUNS,
    MAX_SERVER_CONFIG_BYTES,
    MAX_SERVER_CREDENTIALS,
    MAX_SERVER_POLICIES,
    MAX_SERVER_TRACKED_RUNS,
    MAX_SERVER_TTL_S,
)
from kiln_verify.openenv.credentials import validate_env_name
from kiln_verify.openenv.policy.registry import POLICY_NAMES
from kiln_verify.openenv.urls import normalize_base_url

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "CredentialHandle",
    "OpenEnvSettings",
    "PolicySpec",
    "ServerConfig",
    "default_state_dir",
    "load_config",
    "origin_of",
]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8420
_HANDLE = re.compile(CREDENTIAL_HANDLE_PATTERN)
_ADAPTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/kiln-verify``, else ``~/.local/state/kiln-verify``."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or os.path.expanduser("~")
    base = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return Path(base) / "kiln-verify"


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


@dataclasses.dataclass(frozen=True, slots=True)
class PolicySpec:
    """``[policies.<adapter>]``: a built-in policy name and its string options."""

    policy: str
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _default_policies() -> dict[str, PolicySpec]:
    return {BASE_ADAPTER: PolicySpec("random")}


@dataclasses.dataclass(frozen=True, slots=True)
class ServerConfig:
    """The whole validated configuration; ``state_dir`` holds ``.openenv/runs/<run-id>/``."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    state_dir: Path = dataclasses.field(default_factory=default_state_dir)
    openenv: OpenEnvSettings = dataclasses.field(default_factory=OpenEnvSettings)
    policies: Mapping[str, PolicySpec] = dataclasses.field(default_factory=_default_policies)

    @property
    def runs_root(self) -> Path:
        return self.state_dir / ".openenv" / "runs"


def _fail(rule: str, path: str | None, hint: str | None = None) -> UsageError:
    return UsageError(f"server configuration: {rule}", path=path, hint=hint)


def _table(value: Any, where: str, path: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(f"{where} must be a table", path)
    return value


def _keys(table: Mapping[str, Any], allowed: set[str], where: str, path: str | None) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise _fail(
            f"{where} has unknown key(s) {', '.join(repr(k[:64]) for k in unknown)}",
            path,
            hint=f"allowed: {', '.join(sorted(allowed))}",
        )


def _int(
    table: Mapping[str, Any],
    key: str,
    default: int,
    low: int,
    high: int,
    where: str,
    path: str | None,
) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(f"{where}.{key} must be an integer in {low}..{high}", path)
    return value


def _bool(table: Mapping[str, Any], key: str, default: bool, where: str, path: str | None) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise _fail(f"{where}.{key} must be true or false", path)
    return value


def _credential(
    handle: str, raw: Any, environ: Mapping[str, str], path: str | None
) -> CredentialHandle:
    where = f"[openenv.credentials.{handle[:64]}]"
    if not _HANDLE.fullmatch(handle) or handle == "-":
        raise _fail(f"{where}: a handle is 1..64 of A-Z a-z 0-9 _ -", path)
    table = _table(raw, where, path)
    _keys(table, {"origin", "bearer_token_env"}, where, path)
    origin, variable = table.get("origin"), table.get("bearer_token_env")
    if not isinstance(origin, str) or not isinstance(variable, str):
        raise _fail(f"{where} needs string keys origin and bearer_token_env", path)
    try:
        parsed = normalize_base_url(origin)
        canonical = origin_of(origin)
        validate_env_name(variable)
    except KilnError as exc:
        raise _fail(f"{where}: {exc.rule}", path, hint=exc.hint) from None
    if urlsplit(parsed.base_url).path:
        raise _fail(f"{where}.origin must be an origin scheme://host[:port] without a path", path)
    if not parsed.is_https and not parsed.is_loopback:
        raise _fail(f"{where}.origin must be https:// (plain http only for loopback hosts)", path)
    if not environ.get(variable, "").strip():
        raise _fail(
            f"{where}.bearer_token_env names {variable}, which is unset or empty",
            path,
            hint=f"export {variable} before starting the server",
        )
    return CredentialHandle(canonical, variable)


def _policy(adapter: str, raw: Any, path: str | None) -> PolicySpec:
    where = f"[policies.{adapter[:64]}]"
    if not _ADAPTER.fullmatch(adapter) or adapter.lower() in ("none", "null"):
        raise _fail(f"{where}: an adapter name is 1..128 of A-Z a-z 0-9 . _ -", path)
    table = _table(raw, where, path)
    _keys(table, {"policy", "options"}, where, path)
    name = table.get("policy")
    if name not in POLICY_NAMES:
        raise _fail(f"{where}.policy must be one of {', '.join(POLICY_NAMES)}", path)
    options = _table(table.get("options", {}), f"{where}.options", path)
    if len(options) > MAX_POLICY_OPTIONS:
        raise _fail(f"{where}.options has more than {MAX_POLICY_OPTIONS} entries", path)
    for key, value in options.items():
        if not isinstance(value, str) or max(len(key), len(value)) > MAX_POLICY_OPTION_BYTES:
            raise _fail(f"{where}.options.{key[:64]} must be a string (see docs/policies.md)", path)
    return PolicySpec(str(name), dict(options))


def parse_config(
    document: Mapping[str, Any],
    *,
    path: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServerConfig:
    """Validate an already-parsed TOML document (see the module docstring)."""
    env = os.environ if environ is None else environ
    _keys(document, {"server", "openenv", "policies"}, "the file", path)
    server = _table(document.get("server", {}), "[server]", path)
    _keys(server, {"host", "port", "state_dir"}, "[server]", path)
    host = server.get("host", DEFAULT_HOST)
    state_dir = server.get("state_dir")
    if not isinstance(host, str) or not host:
        raise _fail("[server].host must be a non-empty string", path)
    if state_dir is not None and (not isinstance(state_dir, str) or not state_dir):
        raise _fail("[server].state_dir must be a non-empty string", path)
    port = _int(server, "port", DEFAULT_PORT, 0, 65535, "[server]", path)
    section = _table(document.get("openenv", {}), "[openenv]", path)
    _keys(
        section,
        {
            "enabled",
            "max_active_runs",
            "max_tracked_runs",
            "tracked_run_ttl_secs",
            "allow_remote_environments",
            "credentials",
        },
        "[openenv]",
        path,
    )
    active = _int(section, "max_active_runs", 4, 1, MAX_SERVER_ACTIVE_RUNS, "[openenv]", path)
    tracked = _int(section, "max_tracked_runs", 128, 1, MAX_SERVER_TRACKED_RUNS, "[openenv]", path)
    if tracked < active:
        raise _fail("[openenv].max_tracked_runs must be at least max_active_runs", path)
    credentials = _table(section.get("credentials", {}), "[openenv.credentials]", path)
    if len(credentials) > MAX_SERVER_CREDENTIALS:
        raise _fail(f"more than {MAX_SERVER_CREDENTIALS} credential handles", path)
    settings = OpenEnvSettings(
        enabled=_bool(section, "enabled", True, "[openenv]", path),
        max_active_runs=active,
        max_tracked_runs=tracked,
        tracked_run_ttl_secs=_int(
            section, "tracked_run_ttl_secs", 604800, 1, MAX_SERVER_TTL_S, "[openenv]", path
        ),
        allow_remote_environments=_bool(
            section, "allow_remote_environments", False, "[openenv]", path
        ),
        credentials={h: _credential(h, raw, env, path) for h, raw in credentials.items()},
    )
    raw_policies = _table(document.get("policies", {}), "[policies]", path)
    if len(raw_policies) > MAX_SERVER_POLICIES:
        raise _fail(f"more than {MAX_SERVER_POLICIES} policy tables", path)
    policies = _default_policies()
    policies.update({a: _policy(a, raw, path) for a, raw in raw_policies.items()})
    return ServerConfig(
        host=host,
        port=port,
        state_dir=Path(state_dir) if state_dir else default_state_dir(env),
        openenv=settings,
        policies=policies,
    )


def load_config(path: str | None, *, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """The configuration in ``path`` (a regular file up to ``MAX_SERVER_CONFIG_BYTES``), or
    every default when ``path`` is ``None``."""
    if path is None:
        return parse_config({}, environ=environ)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _fail(f"cannot read the file: {exc.strerror}", path) from None
    if not stat.S_ISREG(info.st_mode):
        raise _fail("the configuration must be a regular file", path)
    if info.st_size > MAX_SERVER_CONFIG_BYTES:
        raise _fail(
            f"the file is larger than MAX_SERVER_CONFIG_BYTES = {MAX_SERVER_CONFIG_BYTES}", path
        )
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _fail(f"not valid TOML ({str(exc)[:160]})", path) from None
    return parse_config(document, path=path, environ=environ)
