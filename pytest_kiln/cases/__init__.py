"""The OpenEnv conformance inventory: stable case ids, levels, clauses and check functions.

Every case works against any OpenEnv server: a valid action is derived from the server's
action schema (or the reset observation's ``legal_actions``), a schema-violating one by
giving a required property the wrong JSON type (:mod:`.actions`). Checks run through
:class:`kiln_verify.openenv.client.OpenEnvClient`; only malformed frames (invalid JSON, a
non-object frame, an unknown type, a ping, the close handshake) use a raw ``websockets``
connection (:mod:`.frames`), because the client can never send those.

A check is an ``async`` function of a :class:`CaseContext`. It returns ``None`` (or a
note) when the requirement holds, raises :class:`CheckFailed` when it does not, and
:class:`NotApplicable` when the server cannot be probed for it. :func:`run_case` turns
that into a :class:`Verdict` according to the case's :class:`Level`: a failed MUST is
``FAILED``, a failed SHOULD ``NON-STRICT``, a failed MAY ``INFORMATIONAL``.

Modules: :mod:`.model` (levels, verdicts, cases, results), :mod:`.context` (what a check
gets), :mod:`.discovery`, :mod:`.session_checks`, :mod:`.error_checks` and :mod:`.tasks`
(the checks), :mod:`.inventory` (the ``CASES`` table) and :mod:`.runner` (verdicts).

Nothing here is imported by the plugin module; websockets, httpx and the client are
imported when a case runs.
"""

from __future__ import annotations

from pytest_kiln.cases.actions import candidate_actions, sample_value, violating_action
from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.inventory import CASES, CASES_BY_ID
from pytest_kiln.cases.model import (
    CAPACITY_PROBE_SESSIONS,
    CASE_TIMEOUT_S,
    DETERMINISM_SEED,
    FRAME_TIMEOUT_S,
    MAX_ACTION_CANDIDATES,
    MAX_EPISODE_STEPS,
    PROTOCOL_DOC,
    VERDICT_ORDER,
    Case,
    CaseResult,
    Check,
    CheckFailed,
    Level,
    NotApplicable,
    Verdict,
)
from pytest_kiln.cases.runner import run_case, run_case_async

__all__ = [
    "CAPACITY_PROBE_SESSIONS",
    "CASES",
    "CASES_BY_ID",
    "CASE_TIMEOUT_S",
    "DETERMINISM_SEED",
    "FRAME_TIMEOUT_S",
    "MAX_ACTION_CANDIDATES",
    "MAX_EPISODE_STEPS",
    "PROTOCOL_DOC",
    "VERDICT_ORDER",
    "Case",
    "CaseContext",
    "CaseResult",
    "Check",
    "CheckFailed",
    "Level",
    "NotApplicable",
    "Verdict",
    "candidate_actions",
    "run_case",
    "run_case_async",
    "sample_value",
    "violating_action",
]
