"""kiln-verify: conformance and verification for OpenEnv rollouts and the HF/TRL hand-off.

The names in ``__all__`` are the supported Python API (docs/python-api.md lists them, and
``tests/test_public_api.py`` pins the list): collect, verify, replay and evaluate OpenEnv
bundles, read their records, render reports, talk to a control plane, and export, verify
and import HF/TRL bundles. Everything else is importable from its module but may change
between releases.

``import kiln_verify`` stays cheap: each name is imported from its module on first access
(a module ``__getattr__``, PEP 562), so ``kiln-verify openenv verify`` and ``from kiln_verify
import verify_bundle`` load only what they use. Nothing inside the package imports this
module (the import contract in ``pyproject.toml`` checks it), so it can reach every layer.

Names renamed so that one name has one meaning stay importable under their old spelling
(``_ALIASES``: the same object, still in ``__all__`` so that ``from kiln_verify import *``
keeps giving them; docs/python-api.md lists them).
"""

from __future__ import annotations

from importlib import import_module

from kiln_verify._version import __version__

TYPE_CHECKING = False
"""Not ``typing.TYPE_CHECKING``: importing ``typing`` would triple the cost of ``import
kiln_verify`` (type checkers treat any ``TYPE_CHECKING`` name as true)."""

if TYPE_CHECKING:
    from typing import Any, Final

    from kiln_verify.control_client.client import ControlClient
    from kiln_verify.control_client.download import download_artifact
    from kiln_verify.control_client.download_run import download_run
    from kiln_verify.errors import ERROR_CLASSES, ERROR_CODES, KilnError, UsageError
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.export.writer import ExportOutcome, export_grpo, export_sft
    from kiln_verify.hf.importer import ImportOutcome, import_peft
    from kiln_verify.hf.verify import HfBundleReport, verify_hf_path
    from kiln_verify.hf.verify_import import verify_import_path
    from kiln_verify.openenv.collect import run_collection
    from kiln_verify.openenv.collect.bundle import Bundle, build_bundle
    from kiln_verify.openenv.collect.controls import CollectionControls
    from kiln_verify.openenv.collect.engine import CollectedGroup, Collection, behavior_identity
    from kiln_verify.openenv.collect.steps import (
        Environments,
        assemble_collection,
        collect,
        inspect_environments,
        publish_bundle,
        run_groups,
    )
    from kiln_verify.openenv.evaluate.engine import evaluate_bundles, run_evaluation
    from kiln_verify.openenv.policy.base import Policy, PolicyRequest, PolicyResponse
    from kiln_verify.openenv.policy.random_policy import RandomPolicy
    from kiln_verify.openenv.policy.registry import build_policy
    from kiln_verify.openenv.protocol.access import EnvironmentAccess
    from kiln_verify.openenv.protocol.client import OpenEnvClient
    from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt
    from kiln_verify.openenv.records.replay import ReplayManifest, read_replay
    from kiln_verify.openenv.records.reports import (
        ReplayRunReport,
        ReplayRunResult,
        VerificationReport,
    )
    from kiln_verify.openenv.records.rollout import AgenticGroup, iter_rollout_lines
    from kiln_verify.openenv.records.summary import RolloutSummary, read_summary
    from kiln_verify.openenv.replay.engine import replay_bundle
    from kiln_verify.openenv.runcheck.engine import verify_run
    from kiln_verify.openenv.runcheck.records import RunVerificationReport
    from kiln_verify.openenv.verify.engine import verify_bundle
    from kiln_verify.report.engine import (
        RenderedReport,
        bundle_report,
        conformance_report,
        evaluation_report,
    )

__all__ = [
    "ERROR_CLASSES",
    "ERROR_CODES",
    "AgenticGroup",
    "Bundle",
    "BundleReport",
    "CollectedGroup",
    "Collection",
    "CollectionControls",
    "ControlClient",
    "EnvironmentAccess",
    "EnvironmentEvaluationReceipt",
    "Environments",
    "ExportOutcome",
    "ExportSource",
    "HfBundleReport",
    "ImportOutcome",
    "KilnError",
    "OpenEnvClient",
    "Policy",
    "PolicyRequest",
    "PolicyResponse",
    "RandomPolicy",
    "RenderedReport",
    "ReplayManifest",
    "ReplayRunReport",
    "ReplayRunResult",
    "RolloutSummary",
    "RunVerificationReport",
    "UsageError",
    "VerificationReport",
    "__version__",
    "assemble_collection",
    "behavior_identity",
    "build_bundle",
    "build_policy",
    "bundle_report",
    "collect",
    "conformance_report",
    "download_artifact",
    "download_run",
    "evaluate_bundles",
    "evaluation_report",
    "export_grpo",
    "export_sft",
    "import_peft",
    "inspect_environments",
    "iter_rollout_lines",
    "publish_bundle",
    "read_replay",
    "read_summary",
    "replay_bundle",
    "run_collection",
    "run_evaluation",
    "run_groups",
    "verify_bundle",
    "verify_hf_path",
    "verify_import_path",
    "verify_path",
    "verify_run",
]

_LAZY: Final[dict[str, str]] = {
    # OpenEnv: collect, verify, replay, evaluate
    "run_collection": "kiln_verify.openenv.collect",
    "CollectionControls": "kiln_verify.openenv.collect.controls",
    "Bundle": "kiln_verify.openenv.collect.bundle",
    # collection in steps (shards, groups run elsewhere, publication elsewhere)
    "collect": "kiln_verify.openenv.collect.steps",
    "inspect_environments": "kiln_verify.openenv.collect.steps",
    "Environments": "kiln_verify.openenv.collect.steps",
    "run_groups": "kiln_verify.openenv.collect.steps",
    "assemble_collection": "kiln_verify.openenv.collect.steps",
    "publish_bundle": "kiln_verify.openenv.collect.steps",
    "Collection": "kiln_verify.openenv.collect.engine",
    "CollectedGroup": "kiln_verify.openenv.collect.engine",
    "behavior_identity": "kiln_verify.openenv.collect.engine",
    "build_bundle": "kiln_verify.openenv.collect.bundle",
    "verify_bundle": "kiln_verify.openenv.verify.engine",
    "replay_bundle": "kiln_verify.openenv.replay.engine",
    "evaluate_bundles": "kiln_verify.openenv.evaluate.engine",
    "run_evaluation": "kiln_verify.openenv.evaluate.engine",
    "OpenEnvClient": "kiln_verify.openenv.protocol.client",
    "EnvironmentAccess": "kiln_verify.openenv.protocol.access",
    # policies
    "Policy": "kiln_verify.openenv.policy.base",
    "PolicyRequest": "kiln_verify.openenv.policy.base",
    "PolicyResponse": "kiln_verify.openenv.policy.base",
    "RandomPolicy": "kiln_verify.openenv.policy.random_policy",
    "build_policy": "kiln_verify.openenv.policy.registry",
    # the records a user reads
    "AgenticGroup": "kiln_verify.openenv.records.rollout",
    "iter_rollout_lines": "kiln_verify.openenv.records.rollout",
    "ReplayManifest": "kiln_verify.openenv.records.replay",
    "read_replay": "kiln_verify.openenv.records.replay",
    "RolloutSummary": "kiln_verify.openenv.records.summary",
    "read_summary": "kiln_verify.openenv.records.summary",
    "VerificationReport": "kiln_verify.openenv.records.reports",
    "ReplayRunReport": "kiln_verify.openenv.records.reports",
    "ReplayRunResult": "kiln_verify.openenv.records.reports",
    "EnvironmentEvaluationReceipt": "kiln_verify.openenv.records.evaluation",
    # errors
    "KilnError": "kiln_verify.errors",
    "UsageError": "kiln_verify.errors",
    "ERROR_CODES": "kiln_verify.errors",
    "ERROR_CLASSES": "kiln_verify.errors",
    # reports
    "bundle_report": "kiln_verify.report.engine",
    "conformance_report": "kiln_verify.report.engine",
    "evaluation_report": "kiln_verify.report.engine",
    "RenderedReport": "kiln_verify.report.engine",
    # the control plane's client
    "ControlClient": "kiln_verify.control_client.client",
    "download_artifact": "kiln_verify.control_client.download",
    "download_run": "kiln_verify.control_client.download_run",
    "verify_run": "kiln_verify.openenv.runcheck.engine",
    "RunVerificationReport": "kiln_verify.openenv.runcheck.records",
    # HF/TRL: export, verify, import
    "export_sft": "kiln_verify.hf.export.writer",
    "export_grpo": "kiln_verify.hf.export.writer",
    "ExportOutcome": "kiln_verify.hf.export.writer",
    "ExportSource": "kiln_verify.hf.export.source",
    "verify_hf_path": "kiln_verify.hf.verify",
    "HfBundleReport": "kiln_verify.hf.verify",
    "import_peft": "kiln_verify.hf.importer",
    "ImportOutcome": "kiln_verify.hf.importer",
    "verify_import_path": "kiln_verify.hf.verify_import",
}
"""Where each exported name lives; imported on first access."""

_ALIASES: Final[dict[str, str]] = {
    # issue 26: the HF/TRL verifier says ``hf`` (``verify_bundle`` is the OpenEnv one)
    "verify_path": "verify_hf_path",
    "BundleReport": "HfBundleReport",
}
"""Old spellings of renamed exports: each is the very object of its new name."""


def __getattr__(name: str) -> Any:
    current = _ALIASES.get(name, name)
    module = _LAZY.get(current)
    if module is None:
        raise AttributeError(f"module 'kiln_verify' has no attribute {name!r}")
    value = getattr(import_module(module), current)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_ALIASES})
