"""Typed records of the OpenEnv rollout bundle and their exact bytes.

=====================  ==========================================================
module                 contents
=====================  ==========================================================
``environment``        recorded environment identity (``kiln.openenv-identity.v1``) and
                       inspection (identity plus raw schemas)
``observation``        recorded observations with the tagged reward, protocol-error
                       records, episode terminations
``rollout``            the JSONL corpus line :class:`AgenticGroup`,
                       ``kiln.openenv-rollout.v1`` provenance, :func:`iter_rollout_lines`
``replay``             ``kiln.openenv-replay.v1`` :class:`ReplayManifest`, :func:`read_replay`
``summary``            ``kiln.openenv-rollout-summary.v5`` (reads v2..v4),
                       :func:`read_summary`, :func:`check_version_rules`
``reports``            verification / replay-run reports, artifact-download receipt (Kiln's
                       exact records); our replay-run notes and the result beside them
``evaluation``         ``kiln.openenv-environment-evaluation.v1`` receipt
``serialize``          file bytes (JSONL line, pretty JSON + LF) and every §4 digest
``prompt``             the exact prompt and observation texts the model sees
``schema_export``      generates ``contracts/kiln-openenv-v1.schema.json``
=====================  ==========================================================

The record base, the field types, the behaviour-policy identity and the chat messages and
trajectory segments are :mod:`kiln_verify.records`, shared with the HF/TRL manifests.
"""

from __future__ import annotations

from kiln_verify.openenv.records.environment import EnvironmentIdentityRecord, EnvironmentInspection
from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import ReplayManifest, read_replay
from kiln_verify.openenv.records.reports import (
    ArtifactDownloadReceipt,
    ReplayRunNotes,
    ReplayRunReport,
    ReplayRunResult,
    VerificationReport,
)
from kiln_verify.openenv.records.rollout import (
    AgenticGroup,
    OpenEnvRolloutProvenance,
    ScoredRollout,
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
    "EnvironmentEvaluationReceipt",
    "EnvironmentIdentityRecord",
    "EnvironmentInspection",
    "ObservationRecord",
    "OpenEnvRolloutProvenance",
    "ProtocolErrorRecord",
    "ReplayManifest",
    "ReplayRunNotes",
    "ReplayRunReport",
    "ReplayRunResult",
    "RolloutSummary",
    "ScoredRollout",
    "VerificationReport",
    "dataset_bytes",
    "iter_rollout_lines",
    "read_replay",
    "read_summary",
    "replay_bytes",
    "report_bytes",
    "rollout_line_bytes",
    "summary_bytes",
]
