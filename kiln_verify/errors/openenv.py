"""Errors of the OpenEnv client and the live engines (kiln-openenv-contract section 8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from kiln_verify.errors.base import KilnError

# --- OpenEnv client (kiln-openenv-contract §8) ------------------------------------------


class OpenEnvError(KilnError, abstract=True):
    """Talking to an OpenEnv environment server failed or the server broke the protocol."""


class EnvironmentUrlInvalid(OpenEnvError):
    """The user gave a base URL the client refuses; a usage error, nothing was contacted."""

    code = "environment_url_invalid"
    exit_code = 2
    default_hint = "give an http(s) base URL without userinfo, query or fragment"


class CredentialInvalid(OpenEnvError):
    """The credential variable name or its value breaks the bearer-token rules."""

    code = "credential_invalid"
    exit_code = 2
    default_hint = "export a non-empty token without whitespace or control characters"


class CredentialInsecure(OpenEnvError):
    """A bearer token would travel in clear text to a non-loopback host."""

    code = "credential_insecure"
    exit_code = 2
    default_hint = "use an https:// URL for remote servers; plain http is for loopback only"


class CredentialReflected(OpenEnvError):
    """The server echoed our bearer token back; the response is rejected unparsed."""

    code = "credential_reflected"
    default_hint = "the server must never echo the Authorization header; fix the environment"


class EnvironmentHttpStatus(OpenEnvError):
    """An HTTP request got a status the contract does not allow (401, 404, 500, ...)."""

    code = "environment_http_status"
    default_hint = "check the URL, the server logs and, for 401/403, --credential-env"
    #: The status the environment answered with (set by the client where it raises this).
    http_status: int | None = None


class EnvironmentRedirect(OpenEnvError):
    """The server answered with a redirect, which is never followed."""

    code = "environment_redirect"
    default_hint = "use the final URL directly; redirects are never followed"
    #: The 3xx status the environment answered with (set by the client).
    http_status: int | None = None


class EnvironmentTransport(OpenEnvError):
    """The connection failed, was reset or timed out below the protocol."""

    code = "environment_transport"
    default_hint = "check that the server is running and reachable from this machine"


class EnvironmentTimeout(OpenEnvError):
    """An HTTP request or a WebSocket exchange took longer than its timeout."""

    code = "environment_timeout"
    default_hint = "raise the timeout or make the environment answer faster"


class DiscoveryInvalid(OpenEnvError):
    """A discovery document (/metadata, /schema, /list_environments, /openapi.json) is malformed."""

    code = "discovery_invalid"
    default_hint = "serve the discovery documents OpenEnv 0.10.0 defines"


class ProtocolViolation(OpenEnvError):
    """A WebSocket frame breaks the wire protocol (binary, oversized, malformed, unknown)."""

    code = "protocol_violation"
    default_hint = "the environment server does not speak the OpenEnv WebSocket protocol"


class UnexpectedResponse(OpenEnvError):
    """A well-formed frame of the wrong type (e.g. `state` in answer to `step`)."""

    code = "unexpected_response"
    default_hint = "the server must answer reset/step with observation and state with state"


class SessionClosed(OpenEnvError):
    """The server closed the WebSocket session."""

    code = "session_closed"
    default_hint = "open a new session"


class SessionPoisoned(OpenEnvError):
    """The session failed earlier and can never be used again (no resend, no late reads)."""

    code = "session_poisoned"
    default_hint = "open a new session; a failed session is closed for good"


class SessionBusy(OpenEnvError):
    """A second request was started while one is in flight; a programming error."""

    code = "session_busy"
    exit_code = 2
    default_hint = "await each reset/step/state before starting the next one"


class RecoverableProtocolError(OpenEnvError):
    """The server answered with a recoverable error code; the session stays usable."""

    code = "environment_error_recoverable"
    default_hint = "fix the request (action, reset data) and send it again on the same session"
    #: The typed error reply (`kiln_verify.openenv.protocol.wire.ProtocolError`).
    error: Any = None


class TerminalProtocolError(OpenEnvError):
    """The server answered with a terminal error code; the session is closed."""

    code = "environment_error_terminal"
    default_hint = "open a new session; for CAPACITY_REACHED wait or raise max sessions"
    #: The typed error reply (`kiln_verify.openenv.protocol.wire.ProtocolError`).
    error: Any = None


class CapacityExhausted(OpenEnvError):
    """No session slot became free within the capacity wait bound."""

    code = "capacity_exhausted"
    default_hint = "raise the wait bound or the server's max sessions, or close other sessions"


class ActionSchemaInvalid(OpenEnvError):
    """The environment's action schema cannot be compiled (or needs a remote reference)."""

    code = "action_schema_invalid"
    default_hint = "publish a self-contained JSON Schema; remote $ref is never resolved"


class ActionInvalid(OpenEnvError):
    """An action does not validate against the environment's action schema."""

    code = "action_invalid"
    default_hint = "produce an action object that the /schema action schema accepts"
    #: The bounded issues (keyword and pointers only), set by the validator.
    issues: tuple[Any, ...] = ()


class EnvironmentIdentityChanged(OpenEnvError):
    """The environment's identity differs from the one recorded earlier."""

    code = "environment_identity_changed"
    default_hint = "the environment changed; start a new run against the current identity"


class ResetNondeterministic(OpenEnvError):
    """Candidates of one group got different reset observations, prompts or hidden states
    for one seed.

    ``conformance_case`` names the conformance case that tests the same rule before any
    collection (two fresh sessions reset with one seed), so a refusal and the conformance
    report's ``collectable`` verdict point at the same evidence.
    """

    code = "reset_nondeterministic"
    conformance_case: ClassVar[str] = "determinism.fresh-session-same-seed"
    default_hint = (
        "reset(seed) must be deterministic: derive every random choice of reset from the seed"
    )


class ResetDone(OpenEnvError):
    """A reset answered ``done: true``; a trainable rollout needs at least one action."""

    code = "reset_done"
    default_hint = "the environment must start episodes in a non-terminal state"


class ReplayDrift(OpenEnvError):
    """Live replay saw the environment behave differently from the recorded bundle.

    ``drift`` locates the first difference in replay order: ``stage`` (``identity``,
    ``reset``, ``step``, ``state``), ``environment_index``, ``group_index``,
    ``candidate_index``, ``step_index`` (absent where not applicable), ``field`` (first
    differing JSON path, or the changed identity fields), bounded ``expected`` /
    ``actual`` renderings (never credentials), and for two differing strings the
    ``offset`` of the first differing character. ``totals`` counts every drifted
    candidate and exchange of the whole replay; ``drifted`` lists the first drifted
    candidates one by one (bounded). The hint names the likely cause. ``detail`` is for
    the replay report, not for a reader of the one-line message (``str`` leaves it out;
    ``to_dict``, hence ``--json``, carries it): the replay's context and every drifted
    exchange kept, grouped by candidate (:mod:`kiln_verify.openenv.replay.detail`).
    """

    code = "replay_drift"
    default_hint = (
        "the live environment no longer reproduces the bundle; re-collect against the "
        "current environment or restore the deployment the bundle was collected from"
    )

    def __init__(
        self,
        rule: str,
        *,
        drift: Mapping[str, Any],
        hint: str | None = None,
        totals: Mapping[str, int] | None = None,
        drifted: Sequence[Mapping[str, Any]] | None = None,
        detail: Mapping[str, Any] | None = None,
        fields: tuple[str, ...] = (),
    ) -> None:
        self.drift = dict(drift)
        self.totals = dict(totals) if totals is not None else None
        self.drifted = [dict(item) for item in drifted] if drifted is not None else None
        self.detail = dict(detail) if detail is not None else None
        super().__init__(rule, hint=hint, fields=fields)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["drift"] = dict(self.drift)
        if self.totals is not None:
            out["totals"] = dict(self.totals)
        if self.drifted is not None:
            out["drifted"] = [dict(item) for item in self.drifted]
        if self.detail is not None:
            out["detail"] = dict(self.detail)
        return out


class EpisodeIdIgnored(ReplayDrift):
    """A reset payload named an ``episode_id`` and the server's state reports another.

    OpenEnv's ``reset(seed, episode_id)`` should keep the id it is given; many example
    servers build ``State(episode_id=str(uuid4()))`` instead. That is not a seed the game
    ignores, so it has its own code and a hint that points at the reset payload rather than
    at the game's randomness: in ``rollout`` (a candidate's state read right after reset)
    and in live replay (a ``final_state.episode_id`` drift whose live value is not the one
    the payload named) alike. It is a :class:`ReplayDrift` so that replay's totals, drifted
    locations and detail travel with it; ``drift`` locates it in rollout too (stage
    ``state``, field ``state.episode_id``). ``conformance_case`` names the case that tests
    the rule (a reset naming an episode id, then ``state``).
    """

    code = "episode_id_ignored"
    conformance_case: ClassVar[str] = "ws.episode-id-echo"
    default_hint = (
        "the server does not keep the episode_id a reset names (OpenEnv's reset(seed, "
        "episode_id) should store it in State.episode_id): fix the environment, or leave "
        "episode_id out of the reset options, so that each session's own id is session "
        "identity, compared by presence and JSON type only"
    )


class TaskApiInvalid(OpenEnvError):
    """A Task API response is malformed, or the environment/split selection is ambiguous."""

    code = "task_api_invalid"
    default_hint = "name the environment (--environment-name) and split (--split) explicitly"


# --- collection journal and shards (docs/resume-and-shards.md) ---------------------------


class JournalError(OpenEnvError, abstract=True):
    """A collection journal (``--journal``) or a shard cannot be used; nothing is published."""

    default_hint = "start a new journal (a new directory) with the controls you want"


class JournalInvalid(JournalError):
    """The directory is not a journal this tool wrote (missing header, foreign files,
    a gap in the group entries, an unreadable entry)."""

    code = "journal_invalid"


class JournalPlanMismatch(JournalError):
    """The journal was written for another plan (environments, reset plan, groups, group
    size, seed start or group range); ``fields`` names what differs."""

    code = "journal_plan_mismatch"


class JournalControlsChanged(JournalError):
    """``--resume`` with controls (or a policy) other than the journal's; ``fields`` names
    each one that differs."""

    code = "journal_controls_changed"
    default_hint = "resume with exactly the controls and policy the journal was started with"


class JournalEntryTampered(JournalError):
    """An entry's digest, its link to the previous entry or its content disagrees with
    the journal."""

    code = "journal_entry_tampered"


class JournalEntryTruncated(JournalError):
    """An entry ends before its last byte (entries are written whole by an atomic rename,
    so a crash cannot leave one short)."""

    code = "journal_entry_truncated"


class JournalEnvironmentChanged(JournalError):
    """An environment inspected on ``--resume`` differs from the one the journal
    recorded when it started."""

    code = "journal_environment_changed"
    default_hint = "the environment changed since the journal started; collect again"


class ShardIncomplete(JournalError):
    """A shard given to ``openenv merge`` is not sealed (its range was not finished and
    revalidated)."""

    code = "shard_incomplete"
    default_hint = "finish the shard with `openenv rollout --resume` before merging"


class ShardMismatch(JournalError):
    """Shards of different plans, controls, environment identities or policies."""

    code = "shard_mismatch"
    default_hint = "merge only shards collected with one set of controls and one policy"


class ShardOverlap(JournalError):
    """Two shards cover the same group."""

    code = "shard_overlap"
    default_hint = "give each group range once"


class ShardGap(JournalError):
    """The shards do not cover the whole plan (a missing range)."""

    code = "shard_gap"
    default_hint = "collect the missing group range and merge again"


# --- the Ray executor (`openenv rollout --executor ray`, docs/ray.md) ---------------------


class ExecutorUnavailable(OpenEnvError):
    """``--executor ray`` without Ray installed; a usage error, nothing was contacted."""

    code = "executor_unavailable"
    exit_code = 2
    default_hint = "install the ray extra: pip install 'kiln-verify[ray]'"


class ExecutorWorkerFailed(OpenEnvError):
    """A Ray worker collecting a group range died (its process, its node or the cluster)
    more often than the range may be retried, or failed outside the collector's own
    refusals; nothing is published."""

    code = "executor_worker_failed"
    default_hint = (
        "run the command again (every range is collected from scratch), or raise "
        "--ray-retries; the worker's log is in the Ray session directory"
    )
