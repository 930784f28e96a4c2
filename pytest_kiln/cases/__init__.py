"""The OpenEnv conformance inventory: stable case ids, levels, clauses and check functions.

Every case works against any OpenEnv server: a valid action is derived from the server's
action schema (or the reset observation's ``legal_actions``), a schema-violating one by
giving a required property the wrong JSON type (:mod:`.actions`). Checks run through
:class:`kiln_verify.openenv.protocol.client.OpenEnvClient`; only malformed frames (invalid JSON, a
non-object frame, an unknown type, a ping, the close handshake) use a raw ``websockets``
connection (:mod:`.frames`), because the client can never send those.

A check is an ``async`` function of a :class:`CaseContext`. It returns ``None`` (or a
note) when the requirement holds, raises :class:`CheckFailed` when it does not, and
:class:`NotApplicable` when the server cannot be probed for it. :func:`run_case` turns
that into a :class:`Verdict` according to the case's :class:`Level`: a failed MUST is
``FAILED``, a failed SHOULD ``NON-STRICT``, a failed MAY ``INFORMATIONAL``.

Modules: :mod:`.model` (levels, verdicts, results, bounds), :mod:`.case` (a case and its
check), :mod:`.context` (what a check gets) with :mod:`.acquire` (session slots with
capacity retries), :mod:`.actions` and :mod:`.patterns` (actions from the schema),
:mod:`.frames` and :mod:`.mcp` (raw frames, JSON-RPC); the checks in :mod:`.discovery`,
:mod:`.session_checks`, :mod:`.protocol_checks`, :mod:`.error_checks`,
:mod:`.capacity_checks`, :mod:`.determinism`, :mod:`.tasks` and :mod:`.mcp_checks`;
:mod:`.inventory` (the ``CASES`` table) and :mod:`.runner` (verdicts).

Nothing here is imported by the plugin module; websockets, httpx and the client are
imported when a case runs.
"""

from __future__ import annotations

from pytest_kiln.cases.actions import (
    ActionBuilder,
    candidate_actions,
    sample_value,
    violating_action,
)
from pytest_kiln.cases.case import Case, Check
from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.inventory import CASES, CASES_BY_ID
from pytest_kiln.cases.model import (
    CAPACITY_PROBE_TIME_S,
    CASE_TIMEOUT_S,
    DEFAULT_CAPACITY_PROBE,
    DETERMINISM_SEED,
    FRAME_TIMEOUT_S,
    MAX_ACTION_CANDIDATES,
    MAX_CAPACITY_PROBE,
    MAX_EPISODE_STEPS,
    PROTOCOL_DOC,
    VERDICT_ORDER,
    CaseResult,
    CheckFailed,
    Level,
    NotApplicable,
    Verdict,
)
from pytest_kiln.cases.runner import run_case, run_case_async

__all__ = [
    "CAPACITY_PROBE_TIME_S",
    "CASES",
    "CASES_BY_ID",
    "CASE_TIMEOUT_S",
    "DEFAULT_CAPACITY_PROBE",
    "DETERMINISM_SEED",
    "FRAME_TIMEOUT_S",
    "MAX_ACTION_CANDIDATES",
    "MAX_CAPACITY_PROBE",
    "MAX_EPISODE_STEPS",
    "PROTOCOL_DOC",
    "VERDICT_ORDER",
    "ActionBuilder",
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
