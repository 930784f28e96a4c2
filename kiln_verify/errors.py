"""Typed errors with stable machine codes.

Every failure a user or a peer can cause surfaces as a :class:`KilnError` subclass. The
``code`` is the contract (reports, exit codes and tests match on it); the message is for
people and says which rule broke, where, and how to fix it. Messages never contain more
than :data:`~kiln_verify.limits.MAX_ERROR_SNIPPET_CHARS` characters of anything a peer
sent, so a hostile server or file cannot flood a terminal, a log or a JSON report.

Adding a code is adding one class here: ``__init_subclass__`` checks the spelling and
uniqueness at import time, and :data:`ERROR_CODES` / :data:`ERROR_CLASSES` are built from
the registry at the end of the module. All error classes live in this module so that the
list is complete without importing anything else.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from kiln_verify.limits import MAX_ERROR_SNIPPET_CHARS

_CODE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
_REGISTRY: dict[str, type[KilnError]] = {}


def snippet(value: object, limit: int = MAX_ERROR_SNIPPET_CHARS) -> str:
    """Render peer-supplied data for a message: ``repr``-quoted and cut to ``limit`` chars.

    ``repr`` keeps control characters and escape sequences from reaching a terminal raw.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        return repr(text[:limit]) + f"... ({len(text)} chars)"
    return repr(text)


class KilnError(Exception):
    """Root of every error kiln-verify reports on purpose.

    ``rule`` is a short statement of what was violated, ``path`` the file concerned,
    ``line`` a 1-based line within it and ``hint`` the fix. Abstract family classes
    (declared with ``abstract=True``) group codes and cannot be raised themselves.
    """

    code: ClassVar[str]
    default_hint: ClassVar[str | None] = None
    exit_code: ClassVar[int] = 1
    _abstract: ClassVar[bool] = True

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._abstract = abstract
        if abstract:
            return
        code = cls.__dict__.get("code")
        if not isinstance(code, str) or not _CODE_PATTERN.match(code):
            raise TypeError(f"{cls.__name__} needs a lowercase snake_case `code`")
        if code in _REGISTRY:
            raise TypeError(f"error code {code!r} is already used by {_REGISTRY[code].__name__}")
        _REGISTRY[code] = cls

    def __init__(
        self,
        rule: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        if type(self)._abstract:
            raise TypeError(f"{type(self).__name__} is abstract; raise a concrete subclass")
        self.rule = rule
        self.path = os.fspath(path) if path is not None else None
        self.line = line
        self.hint = hint if hint is not None else self.default_hint
        super().__init__(rule)

    def at(
        self, *, path: str | os.PathLike[str] | None = None, line: int | None = None
    ) -> KilnError:
        """Attach a location found by an outer layer (a JSONL reader knows the line)."""
        if path is not None:
            self.path = os.fspath(path)
        if line is not None:
            self.line = line
        return self

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f" in {snippet(self.path, 2 * MAX_ERROR_SNIPPET_CHARS)}"
        if self.line is not None:
            where += f" at line {self.line}"
        text = f"{self.code}: {self.rule}{where}"
        if self.hint:
            text += f" (fix: {self.hint})"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``--json`` reports; absent fields are omitted, not null."""
        out: dict[str, Any] = {"code": self.code, "rule": self.rule}
        if self.path is not None:
            out["path"] = self.path
        if self.line is not None:
            out["line"] = self.line
        if self.hint is not None:
            out["hint"] = self.hint
        return out


# --- usage ------------------------------------------------------------------------------


class UsageError(KilnError):
    """The command line or API call itself is wrong; exit status 2, not 1."""

    code = "usage"
    exit_code = 2


# --- limits -----------------------------------------------------------------------------


class LimitExceeded(KilnError):
    """A named bound from :mod:`kiln_verify.limits` (or a caller's cap) was exceeded."""

    code = "limit_exceeded"
    default_hint = "the input is larger than kiln-verify accepts; check that it is the right file"

    def __init__(
        self,
        what: str,
        *,
        limit: str,
        bound: int,
        observed: int | None = None,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.limit = limit
        self.bound = bound
        self.observed = observed
        seen = f" (got at least {observed})" if observed is not None else ""
        super().__init__(f"{what} exceeds {limit} = {bound}{seen}", path=path, line=line, hint=hint)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["limit"] = self.limit
        out["bound"] = self.bound
        if self.observed is not None:
            out["observed"] = self.observed
        return out


# --- JSON -------------------------------------------------------------------------------


class JsonError(KilnError, abstract=True):
    """The bytes are not strict JSON (see docs/byte-rules.md)."""

    default_hint = "produce strict RFC 8259 JSON encoded as UTF-8"


class JsonSyntax(JsonError):
    code = "json_syntax"


class JsonDuplicateKey(JsonError):
    code = "json_duplicate_key"
    default_hint = "every key may appear only once per object"


class JsonNonFinite(JsonError):
    code = "json_non_finite"
    default_hint = "NaN and infinities have no JSON spelling; send a finite number or null"


class JsonInvalidUtf8(JsonError):
    code = "json_invalid_utf8"
    default_hint = "re-encode the file as UTF-8 (without a byte order mark)"


class JsonLoneSurrogate(JsonError):
    code = "json_lone_surrogate"
    default_hint = "UTF-16 surrogates must come in high/low pairs"


class JsonTooDeep(JsonError):
    code = "json_too_deep"
    default_hint = "flatten the document; see MAX_JSON_DEPTH in docs/byte-rules.md"


class JsonNumberTooLong(JsonError):
    code = "json_number_too_long"
    default_hint = "numbers longer than MAX_JSON_NUMBER_CHARS are refused; send them as strings"


class JsonNotObject(JsonError):
    code = "json_not_object"
    default_hint = "the document must be a single JSON object"


class JsonUnsupportedType(JsonError):
    code = "json_unsupported_type"
    default_hint = "only dict (with str keys), list, tuple, str, int, float, bool and None encode"


class JsonlBlankLine(JsonError):
    code = "jsonl_blank_line"
    default_hint = "remove empty lines; every line holds exactly one JSON value"


class JsonlMissingNewline(JsonError):
    code = "jsonl_missing_newline"
    default_hint = "every line, the last one included, ends with a single LF"


# --- records ----------------------------------------------------------------------------


class RecordInvalid(KilnError):
    """A well-formed JSON value does not have the shape its record type requires."""

    code = "record_invalid"
    default_hint = "regenerate the document with a writer for this record version"


class RecordSchemaUnsupported(KilnError):
    """A record's ``schema`` string names a record type or version we do not read."""

    code = "record_schema_unsupported"
    default_hint = "check that the file is the right kind of record and was written by Kiln"


class SummaryVersionUnsupported(KilnError):
    """A rollout summary's ``schema`` is not one of v2..v5 (v1 and unknown versions)."""

    code = "summary_version_unsupported"
    default_hint = "recollect with a current writer; only rollout-summary v2..v5 are verifiable"


class SummaryVersionConflict(KilnError):
    """A rollout summary carries (or lacks) a field its version forbids (or requires)."""

    code = "summary_version_conflict"
    default_hint = "the receipt mixes fields of different summary versions; regenerate it"


# --- digests ----------------------------------------------------------------------------


class DigestError(KilnError, abstract=True):
    """A content identity is malformed or does not match the bytes."""


class DigestMalformed(DigestError):
    code = "digest_malformed"
    default_hint = "write digests as 'sha256:' followed by 64 lowercase hex digits"


class DigestMismatch(DigestError):
    code = "digest_mismatch"
    default_hint = "the file changed after its digest was recorded; regenerate or restore it"


class SizeMismatch(DigestError):
    code = "size_mismatch"
    default_hint = "the file changed after its size was recorded; regenerate or restore it"


# --- paths and files --------------------------------------------------------------------


class PathRuleError(KilnError, abstract=True):
    """A path breaks the artifact path rules or does not resolve to what it must."""


class PathInvalid(PathRuleError):
    code = "path_invalid"
    default_hint = "use a relative '/'-separated path without '.', '..', empty parts or controls"


class PathSymlink(PathRuleError):
    code = "path_symlink"
    default_hint = "replace the symbolic link with the real file or directory"


class PathNotRegular(PathRuleError):
    code = "path_not_regular"
    default_hint = "the path must name a regular file"


class PathNotDirectory(PathRuleError):
    code = "path_not_directory"
    default_hint = "every parent component must be a real directory"


class PathMissing(PathRuleError):
    code = "path_missing"
    default_hint = "check the path; the file does not exist"


class FileAccessError(KilnError):
    """The operating system refused a read (permissions, I/O error)."""

    code = "io_failed"
    default_hint = "check that the file is readable by this user and the disk is healthy"


# --- publication ------------------------------------------------------------------------


class PublishError(KilnError, abstract=True):
    """An output could not be published atomically; nothing was left at the target."""


class TargetExists(PublishError):
    code = "target_exists"
    default_hint = "choose a new output path or remove the existing one first"


class PublishFailed(PublishError):
    code = "publish_failed"
    default_hint = "check that the parent directory exists, is writable and has free space"


class SymlinkRefused(PublishError):
    code = "symlink_refused"
    default_hint = "publish to a real directory; symbolic links are never followed"


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


class EnvironmentRedirect(OpenEnvError):
    """The server answered with a redirect, which is never followed."""

    code = "environment_redirect"
    default_hint = "use the final URL directly; redirects are never followed"


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
    #: The typed error reply (`kiln_verify.openenv.wire.ProtocolError`).
    error: Any = None


class TerminalProtocolError(OpenEnvError):
    """The server answered with a terminal error code; the session is closed."""

    code = "environment_error_terminal"
    default_hint = "open a new session; for CAPACITY_REACHED wait or raise max sessions"
    #: The typed error reply (`kiln_verify.openenv.wire.ProtocolError`).
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
    """Candidates of one group got different reset observations or prompts for one seed."""

    code = "reset_nondeterministic"
    default_hint = (
        "reset(seed) must be deterministic: derive every random choice of reset from the seed"
    )


class ResetDone(OpenEnvError):
    """A reset answered ``done: true``; a trainable rollout needs at least one action."""

    code = "reset_done"
    default_hint = "the environment must start episodes in a non-terminal state"


class ReplayDrift(OpenEnvError):
    """Live replay saw the environment behave differently from the recorded bundle.

    ``drift`` locates it: ``stage`` (``identity``, ``reset``, ``step``, ``state``),
    ``environment_index``, ``group_index``, ``candidate_index``, ``step_index`` (absent
    where not applicable), ``field`` (first differing JSON path, or the changed identity
    fields) and bounded ``expected`` / ``actual`` renderings (never credentials).
    """

    code = "replay_drift"
    default_hint = (
        "the live environment no longer reproduces the bundle; re-collect against the "
        "current environment or restore the deployment the bundle was collected from"
    )

    def __init__(self, rule: str, *, drift: Mapping[str, Any], hint: str | None = None) -> None:
        self.drift = dict(drift)
        super().__init__(rule, hint=hint)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["drift"] = dict(self.drift)
        return out


class TaskApiInvalid(OpenEnvError):
    """A Task API response is malformed, or the environment/split selection is ambiguous."""

    code = "task_api_invalid"
    default_hint = "name the environment (--environment-name) and split (--split) explicitly"


# --- policies (kiln_verify.openenv.policy) ----------------------------------------------


class PolicyError(KilnError, abstract=True):
    """A policy could not be built or could not produce the next model output."""


class PolicyConfigInvalid(PolicyError):
    """The policy name or one of its options is wrong; a usage error, nothing was contacted."""

    code = "policy_config_invalid"
    exit_code = 2
    default_hint = "see docs/policies.md for each policy's options"


class PolicyUnavailable(PolicyError):
    """The policy needs an optional dependency that is not installed."""

    code = "policy_unavailable"
    exit_code = 2
    default_hint = "install the train extra: pip install 'kiln-verify[train]'"


class PolicyScriptInvalid(PolicyError):
    """A policy script file is not in the documented format (docs/policies.md)."""

    code = "policy_script_invalid"
    exit_code = 2
    default_hint = "a script is a JSON array of action texts or an object of such arrays"


class PolicyScriptExhausted(PolicyError):
    """A scripted policy was asked for a step its script does not cover."""

    code = "policy_script_exhausted"
    default_hint = "give the script at least --max-steps action texts for every episode"


class PolicyHttpStatus(PolicyError):
    """The chat-completions server answered with a non-2xx status."""

    code = "policy_http_status"
    default_hint = "check the server URL, the model name and, for 401/403, the API key"


class PolicyRedirect(PolicyError):
    """The chat-completions server answered with a redirect, which is never followed."""

    code = "policy_redirect"
    default_hint = "use the final URL directly; redirects are never followed"


class PolicyTransport(PolicyError):
    """The connection to the chat-completions server failed or timed out."""

    code = "policy_transport"
    default_hint = "check that the inference server is running and reachable"


class PolicyResponseInvalid(PolicyError):
    """The chat-completions response is not strict JSON of the expected shape."""

    code = "policy_response_invalid"
    default_hint = "the server must implement the OpenAI /v1/chat/completions response shape"


class PolicyGenerationFailed(PolicyError):
    """A local model failed to load or to generate (tokenizer, template, forward pass)."""

    code = "policy_generation_failed"
    default_hint = "check the model directory: config, weights, tokenizer and chat template"


# --- offline bundle verification (kiln-openenv-contract §6) -----------------------------


class BundleError(KilnError, abstract=True):
    """A rollout bundle fails offline verification: a rule of §6 is broken.

    ``location`` names the group / candidate / step (or record) concerned, e.g.
    ``group 3 candidate 1 step 0``; ``path`` is the bundle file the rule was checked in.
    """

    default_hint = (
        "the bundle was modified or produced by a non-conforming collector; "
        "re-collect it or restore the published files"
    )

    def __init__(
        self,
        rule: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
        location: str | None = None,
    ) -> None:
        self.location = location
        super().__init__(rule, path=path, line=line, hint=hint)

    def __str__(self) -> str:
        text = super().__str__()
        if self.location is None:
            return text
        return text.replace(f"{self.code}: ", f"{self.code}: {self.location}: ", 1)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.location is not None:
            out["location"] = self.location
        return out


class BundleDatasetDigestMismatch(BundleError):
    """The JSONL bytes differ from the summary's (or the replay's) size / SHA-256 (§6.3, §6.6)."""

    code = "bundle_dataset_digest_mismatch"


class BundleReplayDigestMismatch(BundleError):
    """The replay file bytes differ from the summary's size / SHA-256 (§6.3)."""

    code = "bundle_replay_digest_mismatch"


class BundleReplayInconsistent(BundleError):
    """The replay manifest contradicts itself (§6.5: indices, terminations, budget, state)."""

    code = "bundle_replay_inconsistent"


class BundleReturnMismatch(BundleError):
    """A recomputed episode return (or reward) differs bit-wise from the recorded one."""

    code = "bundle_return_mismatch"


class BundleHeaderMismatch(BundleError):
    """Summary and replay disagree on environments, max_steps, penalty or counts (§6.6)."""

    code = "bundle_header_mismatch"


class BundleResetPlanMismatch(BundleError):
    """The reset payloads do not reconstruct ``reset_plan_sha256`` (§6.7)."""

    code = "bundle_reset_plan_mismatch"


class BundleGroupPlanMismatch(BundleError):
    """A group breaks the deterministic plan: size, seed, environment, reset seed (§6.8)."""

    code = "bundle_group_plan_mismatch"


class BundleMessagesMismatch(BundleError):
    """A JSONL line's prompt differs from the recomputed initial messages (§6.8)."""

    code = "bundle_messages_mismatch"


class BundleProvenanceMismatch(BundleError):
    """A completion's ``kiln.openenv-rollout.v1`` provenance contradicts the replay (§6.9)."""

    code = "bundle_provenance_mismatch"


class BundleTrajectoryMismatch(BundleError):
    """A completion's trajectory or text does not match the replay exchanges (§6.9)."""

    code = "bundle_trajectory_mismatch"


class BundleRecordMismatch(BundleError):
    """A summary ``rollouts[]`` record contradicts the replay candidate (§6.9)."""

    code = "bundle_record_mismatch"


class BundleStatsMismatch(BundleError):
    """The summary ``stats`` differ from the recomputed statistics (§6.10)."""

    code = "bundle_stats_mismatch"


# --- paired held-out evaluation (kiln-openenv-contract §9) ------------------------------


class EvaluationPairingMismatch(BundleError):
    """Baseline and candidate bundles are not paired (§9 step 3): environments, options, or
    a group's index, environment, seed, reset payload, reset observation or candidates
    differ. No unpaired estimate is ever produced; ``location`` names the group."""

    code = "evaluation_pairing_mismatch"
    default_hint = (
        "collect baseline and candidate with identical options against unchanged "
        "environments (kiln-verify openenv evaluate does both)"
    )


ERROR_CLASSES: Mapping[str, type[KilnError]] = MappingProxyType(dict(_REGISTRY))
"""Every concrete error class by code."""

ERROR_CODES: frozenset[str] = frozenset(ERROR_CLASSES)
"""Every machine code kiln-verify can report."""
