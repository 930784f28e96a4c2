"""Typed records of the OpenEnv rollout bundle and their exact bytes.

=====================  ==========================================================
module                 contents
=====================  ==========================================================
``common``             :class:`Record` base, digest/float/int/text field types, tagged
                       reward, behaviour-policy identity, recorded environment
                       identity and inspection, observation and protocol-error records
``rollout``            the JSONL corpus line :class:`AgenticGroup`, trajectory segments,
                       ``kiln.openenv-rollout.v1`` provenance, :func:`iter_rollout_lines`
``replay``             ``kiln.openenv-replay.v1`` :class:`ReplayManifest`, :func:`read_replay`
``summary``            ``kiln.openenv-rollout-summary.v5`` (reads v2..v4),
                       :func:`read_summary`, :func:`check_version_rules`
``reports``            verification / replay-run reports, artifact-download receipt
``evaluation``         ``kiln.openenv-environment-evaluation.v1`` receipt
``serialize``          file bytes (JSONL line, pretty JSON + LF) and every §4 digest
``prompt``             the exact prompt and observation texts the model sees
``schema_export``      generates ``contracts/kiln-openenv-v1.schema.json``
=====================  ==========================================================
"""

from __future__ import annotations

from kiln_verify.openenv.records.common import (
    BehaviorPolicyIdentity,
    EnvironmentIdentityRecord,
    EnvironmentInspection,
    ObservationRecord,
    ProtocolErrorRecord,
    Record,
    validate_record,
)
from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt
from kiln_verify.openenv.records.replay import ReplayManifest, read_replay
from kiln_verify.openenv.records.reports import (
    ArtifactDownloadReceipt,
    ReplayRunReport,
    VerificationReport,
)
from kiln_verify.openenv.records.rollout import (
    AgenticGroup,
    OpenEnvRolloutProvenance,
    ScoredRollout,
    TurnSegment,
    iter_rollout_lines,
)
from kiln_verify.openenv.records.serialize import (
    dataset_bytes,
    replay_bytes,
    report_bytes,
    rollout_line_bytes,
    summary_bytes,
)
from kiln_verify.openenv.records.summary import RolloutSummary, read_summary

__all__ = [
    "AgenticGroup",
    "ArtifactDownloadReceipt",
    "BehaviorPolicyIdentity",
    "EnvironmentEvaluationReceipt",
    "EnvironmentIdentityRecord",
    "EnvironmentInspection",
    "ObservationRecord",
    "OpenEnvRolloutProvenance",
    "ProtocolErrorRecord",
    "Record",
    "ReplayManifest",
    "ReplayRunReport",
    "RolloutSummary",
    "ScoredRollout",
    "TurnSegment",
    "VerificationReport",
    "dataset_bytes",
    "iter_rollout_lines",
    "read_replay",
    "read_summary",
    "replay_bytes",
    "report_bytes",
    "rollout_line_bytes",
    "summary_bytes",
    "validate_record",
]
