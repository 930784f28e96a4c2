"""The conformance data model: levels, verdicts, results, bounds and the check outcomes.

The case itself (:class:`~pytest_kiln.cases.case.Case`) is in :mod:`.case`: its check takes
the context, which builds on this module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kiln_verify.errors import RecoverableProtocolError, TerminalProtocolError

PROTOCOL_DOC = "docs/openenv-protocol.md"
"""The document every case's clause cites (shipped in the repository)."""
#: Seconds one raw frame exchange may take before the case counts it as no answer.
FRAME_TIMEOUT_S = 5.0
#: Seconds a whole case may take.
CASE_TIMEOUT_S = 60.0
#: How many concurrent sessions the capacity cases open at most (``--kiln-capacity-probe``).
#: Well above OpenEnv's documented defaults (1 for ``create_app``, 8 for echo_env's
#: ``MAX_CONCURRENT_ENVS``), so a default deployment reaches its limit.
DEFAULT_CAPACITY_PROBE = 64
#: The largest ``--kiln-capacity-probe`` accepted (each session is a socket held open).
MAX_CAPACITY_PROBE = 1024
#: Seconds the capacity probe may spend opening sessions before it reports what it saw.
CAPACITY_PROBE_TIME_S = 30.0
#: Seconds a case waits for a session slot (CAPACITY_REACHED retries with the collector's
#: backoff) before it gives up: long enough for any server to release the slot of the
#: suite's own previous case.
SESSION_WAIT_S = 10.0
#: ``capacity.slot-release``: a closed session's slot must be free again within this...
SLOT_RELEASE_BOUND_S = 1.0
#: ...and the measurement polls for at most this long, every ``SLOT_RELEASE_POLL_S``.
SLOT_RELEASE_WAIT_S = 5.0
SLOT_RELEASE_POLL_S = 0.01
#: How many steps ``post-done.frozen`` plays before giving up on reaching ``done``.
MAX_EPISODE_STEPS = 200
#: How many distinct schema-valid actions a step check tries.
MAX_ACTION_CANDIDATES = 8
DETERMINISM_SEED = 7
#: Every HTTP status: the checks judge the status themselves.
ANY_STATUS = frozenset(range(100, 600))


class Level(enum.StrEnum):
    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


class Verdict(enum.StrEnum):
    OK = "OK"
    NON_STRICT = "NON-STRICT"
    FAILED = "FAILED"
    INFORMATIONAL = "INFORMATIONAL"
    SKIPPED = "SKIPPED"


VERDICT_ORDER: tuple[Verdict, ...] = tuple(Verdict)

#: The verdict of a case whose requirement does not hold, by level.
FAILURE_VERDICT: dict[Level, Verdict] = {
    Level.MUST: Verdict.FAILED,
    Level.SHOULD: Verdict.NON_STRICT,
    Level.MAY: Verdict.INFORMATIONAL,
}


class CheckFailed(Exception):
    """The requirement does not hold; the message says what was expected and observed."""


class NotApplicable(Exception):
    """The server cannot be probed for this requirement (the verdict is SKIPPED)."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    case_id: str
    level: Level
    clause: str
    verdict: Verdict
    detail: str
    duration_s: float
    #: Numbers a case measured (admitted sessions, slot-release latency, capacity retries);
    #: written to the report only when there are any.
    measurements: dict[str, int | float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "case": self.case_id,
            "level": self.level.value,
            "clause": self.clause,
            "verdict": self.verdict.value,
            "detail": self.detail,
            "duration_s": round(self.duration_s, 4),
        }
        if self.measurements:
            row["measurements"] = dict(sorted(self.measurements.items()))
        return row


def describe(exc: BaseException) -> str:
    """A one-line description of an exception: ``CODE: rule`` for Kiln errors."""
    from kiln_verify.errors import KilnError

    if isinstance(exc, KilnError):
        return f"{exc.code}: {exc.rule}"
    return f"{type(exc).__name__}: {exc}"


def protocol_code(exc: RecoverableProtocolError | TerminalProtocolError) -> str | None:
    """The OpenEnv error code a protocol error frame carried (``None`` without a frame)."""
    if exc.error is None:
        return None
    code = exc.error.code.value
    return code if isinstance(code, str) else None
