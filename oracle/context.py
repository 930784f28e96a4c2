"""Everything one oracle server shares between its HTTP routes and its WebSocket sessions.

All of it lives on the server's single event loop and environment calls run inline, so
the session accounting needs no lock: a check and the reservation that follows it are
never separated by an `await`, which is what makes the capacity limit exact.
"""

from __future__ import annotations

import dataclasses
import hmac
import uuid
from collections.abc import Mapping
from typing import Any

from oracle import schemas
from oracle.base import Environment, Outcome
from oracle.faults import Faults
from oracle.tools import ToolEnvironment
from oracle.validation import (
    ErrorItem,
    action_errors,
    check_mcp_discriminator,
    tool_action_errors,
)
from oracle.wire import dumps_bytes

#: Default `--max-sessions`: generous for a test machine, small enough to bound memory.
DEFAULT_MAX_SESSIONS = 64


@dataclasses.dataclass(frozen=True)
class Documents:
    """The discovery bodies, serialised once: `/metadata` and `/schema` are per-frame cheap."""

    metadata: bytes
    schema: bytes

    @classmethod
    def build(cls, env: type[Environment], *, drifted: bool) -> Documents:
        return cls(
            metadata=dumps_bytes(schemas.metadata_document(env, drifted=drifted)),
            schema=dumps_bytes(schemas.schema_document(env, drifted=drifted)),
        )


class CapacityRefused(Exception):
    """The numbers for OpenEnv's `CAPACITY_REACHED` frame."""

    def __init__(self, active: int, maximum: int) -> None:
        super().__init__(
            f"Server at capacity: {active}/{maximum} sessions active. "
            "Cannot accept new connections.")
        self.active = active
        self.maximum = maximum


class FactoryFailed(Exception):
    """The environment factory raised; `str(exc)` is OpenEnv's message for it."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Environment factory '{name}' failed to create instance.")
        self.factory_name = name


class AttachRefused(Exception):
    """`/ws?session_id=` cannot attach; `str(exc)` is OpenEnv's SESSION_ERROR message."""


@dataclasses.dataclass
class HttpSession:
    """An HTTP MCP session (`openenv/session/create`): it holds a slot until closed."""

    env: Environment
    attached: bool = False
    #: `openenv/session/close` arrived while a WebSocket was attached: destroy on detach.
    closing: bool = False


#: `ignore-seed`: the N-th such reset plays this seed plus N, whatever seed it was given.
IGNORED_SEED_BASE = 1_000_000


class ServerContext:
    """Per-server configuration, precomputed documents and live session counters."""

    def __init__(self, env: type[Environment], *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 faults: Faults | None = None) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.env = env
        self.max_sessions = max_sessions
        self.faults = faults or Faults()
        self.token = self.faults.bearer_token()
        self.fields = env.action_fields
        self.documents = Documents.build(env, drifted=False)
        self.drifted_documents = Documents.build(env, drifted=True)
        self.list_environments = dumps_bytes([env.env_name])
        self.openapi = schemas.openapi_document()
        self.active_sessions = 0
        self.session_attempts = 0
        self.http_sessions: dict[str, HttpSession] = {}
        self.ws_resets = 0
        self.reset_nonce = 0
        #: Resets under `ignore-seed`, `ignore-episode-id` or `unseeded-hidden-state`.
        self.unseeded_resets = 0

    def make_env(self) -> Environment:
        """The environment factory; the `factory-error` fault makes every call fail."""
        if self.faults.factory_error:
            raise RuntimeError("factory-error fault: the environment factory failed")
        return self.env()

    def action_errors(self, action: Mapping[str, Any]) -> list[ErrorItem]:
        """The validation errors OpenEnv's action model gives `action` (may raise TypeError)."""
        check_mcp_discriminator(action)
        if issubclass(self.env, ToolEnvironment):
            return tool_action_errors(action)
        return action_errors(self.fields, action)

    # -- sessions ----------------------------------------------------------------------------

    def acquire(self) -> None:
        """Reserve a slot or raise `CapacityRefused`; `flaky-capacity` refuses every Nth."""
        self.session_attempts += 1
        flaky = self.faults.flaky_capacity
        if self.active_sessions >= self.max_sessions or (
                flaky is not None and self.session_attempts % flaky == 0):
            raise CapacityRefused(self.active_sessions, self.max_sessions)
        self.active_sessions += 1

    def release(self) -> None:
        self.active_sessions -= 1

    # -- HTTP MCP sessions (OpenEnv's `openenv/session/*` extension) -----------------------

    def create_http_session(self) -> str:
        """Reserve a slot and build an environment; `CapacityRefused` or `FactoryFailed`."""
        self.acquire()
        try:
            env = self.make_env()
        except Exception:
            self.release()
            raise FactoryFailed(self.env.__name__) from None
        session_id = str(uuid.uuid4())
        self.http_sessions[session_id] = HttpSession(env)
        return session_id

    def close_http_session(self, session_id: str) -> str | None:
        """`closed`, `closing` (a WebSocket is attached) or None for an unknown id."""
        session = self.http_sessions.get(session_id)
        if session is None:
            return None
        if session.attached:
            session.closing = True
            return "closing"
        del self.http_sessions[session_id]
        self.release()
        return "closed"

    def attach(self, session_id: str) -> Environment:
        session = self.http_sessions.get(session_id)
        if session is None:
            raise AttachRefused(f"Unknown session_id: {session_id}")
        if session.attached:
            raise AttachRefused(f"Session {session_id} already has an attached WebSocket")
        session.attached = True
        return session.env

    def detach(self, session_id: str) -> None:
        session = self.http_sessions.get(session_id)
        if session is None:
            return
        session.attached = False
        if session.closing:
            del self.http_sessions[session_id]
            self.release()

    # -- identity ----------------------------------------------------------------------------

    def count_reset(self) -> None:
        self.ws_resets += 1

    def current_documents(self) -> Documents:
        """`identity-drift=K`: the original identity for the first K WebSocket resets."""
        drift = self.faults.identity_drift
        if drift is not None and self.ws_resets > drift:
            return self.drifted_documents
        return self.documents

    # -- faults that touch observations and credentials -----------------------------------

    def authorized(self, headers: Mapping[bytes, bytes] | None) -> bool:
        """`require-bearer`: exact `Bearer <token>`, compared in constant time."""
        if self.token is None:
            return True
        value = (headers or {}).get(b"authorization", b"")
        scheme, _, credential = value.partition(b" ")
        return bool(scheme.lower() == b"bearer" and hmac.compare_digest(credential, self.token))

    def reset(self, env: Environment, payload: Mapping[str, Any]) -> Outcome:
        """Reset `env` from `payload` as the seed and episode-id fault profiles say.

        `ignore-seed` plays seed `IGNORED_SEED_BASE + N`, `ignore-episode-id` names the
        episode `oracle-episode-N`, and `unseeded-hidden-state` puts `hidden_draw: N` in the
        state only, where N counts such resets on this server (WebSocket and HTTP), so two
        resets never agree and a test run is still reproducible.
        """
        faults = self.faults
        if not (faults.ignore_seed or faults.ignore_episode_id or faults.unseeded_hidden_state):
            return env.reset(payload)
        self.unseeded_resets += 1
        draw = self.unseeded_resets
        effective = dict(payload)
        if faults.ignore_seed:
            effective["seed"] = IGNORED_SEED_BASE + draw
        if faults.ignore_episode_id:
            effective.pop("episode_id", None)
        outcome = env.reset(effective)
        if faults.ignore_episode_id:
            env.episode_id = f"oracle-episode-{draw}"
        env.fault_state = {"hidden_draw": draw} if faults.unseeded_hidden_state else {}
        return outcome

    def decorate_reset(self, observation: dict[str, Any], authorization: str | None) -> None:
        """Apply `reflect-authorization` and `nondeterministic-reset` to a reset observation."""
        if self.faults.reflect_authorization:
            observation["authorization"] = authorization
        if self.faults.nondeterministic_reset:
            self.reset_nonce += 1
            text = observation.get("input_text")
            if isinstance(text, str):
                observation["input_text"] = f"{text}\n(reset nonce {self.reset_nonce})"
            else:
                observation["reset_nonce"] = self.reset_nonce
