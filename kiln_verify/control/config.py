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

    [model]                        # optional; `serve --model DIR` sets path (see
    path = "/models/tiny"          # sections/model.py and docs/resident-model.md)

Each family's section is parsed by its own module (:mod:`kiln_verify.control.sections`);
this module owns ``[server]``, the file itself and the assembled :class:`ServerConfig`.
Without a file every default applies and adapter ``base`` is the ``random`` policy, so a
newcomer's ``kiln-verify serve`` collects from a loopback oracle at once. Every problem is
a usage error (exit status 2) naming the key and the fix; nothing is half-applied.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kiln_verify.control.sections import SECTIONS
from kiln_verify.control.sections.model import ModelSettings
from kiln_verify.control.sections.openenv import CredentialHandle, OpenEnvSettings, origin_of
from kiln_verify.control.sections.policies import PolicySpec, default_policies
from kiln_verify.control.sections.rules import fail, integer, known_keys, table
from kiln_verify.limits import MAX_SERVER_CONFIG_BYTES

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "CredentialHandle",
    "ModelSettings",
    "OpenEnvSettings",
    "PolicySpec",
    "ServerConfig",
    "default_state_dir",
    "load_config",
    "origin_of",
    "parse_config",
]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8420


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/kiln-verify``, else ``~/.local/state/kiln-verify``."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or os.path.expanduser("~")
    base = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return Path(base) / "kiln-verify"


@dataclasses.dataclass(frozen=True, slots=True)
class ServerConfig:
    """The whole validated configuration; ``state_dir`` holds ``.openenv/runs/<run-id>/``.

    One field per section of :data:`kiln_verify.control.sections.SECTIONS`."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    state_dir: Path = dataclasses.field(default_factory=default_state_dir)
    openenv: OpenEnvSettings = dataclasses.field(default_factory=OpenEnvSettings)
    policies: Mapping[str, PolicySpec] = dataclasses.field(default_factory=default_policies)
    model: ModelSettings | None = None

    @property
    def runs_root(self) -> Path:
        return self.state_dir / ".openenv" / "runs"


def parse_config(
    document: Mapping[str, Any],
    *,
    path: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServerConfig:
    """Validate an already-parsed TOML document (see the module docstring)."""
    env = os.environ if environ is None else environ
    known_keys(document, {"server", *(s.key for s in SECTIONS)}, "the file", path)
    server = table(document.get("server", {}), "[server]", path)
    known_keys(server, {"host", "port", "state_dir"}, "[server]", path)
    host = server.get("host", DEFAULT_HOST)
    state_dir = server.get("state_dir")
    if not isinstance(host, str) or not host:
        raise fail("[server].host must be a non-empty string", path)
    if state_dir is not None and (not isinstance(state_dir, str) or not state_dir):
        raise fail("[server].state_dir must be a non-empty string", path)
    port = integer(server, "port", DEFAULT_PORT, 0, 65535, "[server]", path)
    sections = {s.field: s.parse(document.get(s.key, {}), env, path) for s in SECTIONS}
    return ServerConfig(
        host=host,
        port=port,
        state_dir=Path(state_dir) if state_dir else default_state_dir(env),
        **sections,
    )


def load_config(path: str | None, *, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """The configuration in ``path`` (a regular file up to ``MAX_SERVER_CONFIG_BYTES``), or
    every default when ``path`` is ``None``."""
    if path is None:
        return parse_config({}, environ=environ)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise fail(f"cannot read the file: {exc.strerror}", path) from None
    if not stat.S_ISREG(info.st_mode):
        raise fail("the configuration must be a regular file", path)
    if info.st_size > MAX_SERVER_CONFIG_BYTES:
        raise fail(
            f"the file is larger than MAX_SERVER_CONFIG_BYTES = {MAX_SERVER_CONFIG_BYTES}", path
        )
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise fail(f"not valid TOML ({str(exc)[:160]})", path) from None
    return parse_config(document, path=path, environ=environ)
