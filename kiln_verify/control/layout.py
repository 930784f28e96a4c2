"""Where each artifact kind of a run lives, relative to the run directory.

One table for both sides: the server's run kinds publish each artifact at this path in the
run directory, and ``kiln-verify openenv artifact RUN_ID --all`` writes each download at the
same path beneath its output directory, so a downloaded run has the run's own layout and
``kiln-verify openenv verify-run`` reads either one. The kinds are Kiln's (§12:
``OpenEnvArtifact.kind``); the paths are ours (Kiln names the run directory's files only
loosely: the bundle, ``run.json``, an evaluation subdirectory, the two training records).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ARTIFACT_PATHS",
    "EVALUATION_DIR",
    "RESUMED_AS_FILE",
    "RESUMED_FROM_FILE",
    "RUN_JOURNAL_DIR",
    "RUN_STATUS_FILE",
    "artifact_path",
]

RUN_STATUS_FILE: Final = "run.json"
"""The run status beside the artifacts (the server's ``run.json``; in a downloaded run, the
status document as the server answered it)."""

RUN_JOURNAL_DIR: Final = "journal"
"""A rollout run's collection journal (kiln-verify's own, docs/resume-and-shards.md): every
finished group, kept after a restart so that ``POST /v1/openenv/runs/{id}/resume`` can
continue it. Never an artifact, never served."""

RESUMED_FROM_FILE: Final = "resumed-from.json"
"""In a run created by the resume route: ``kiln-verify.openenv-run-resume.v1`` naming the
interrupted run it continues (kiln-verify's own record; Kiln's status has no such link)."""

RESUMED_AS_FILE: Final = "resumed-as.json"
"""In an interrupted run that was resumed: the same record, naming the new run (a second
resume of the run is refused)."""

EVALUATION_DIR: Final = "environment-evaluation"
"""The paired held-out evaluation's subdirectory (§9)."""

_BUNDLE: Final = {
    "dataset": "openenv.rollouts.jsonl",
    "replay": "openenv.replay.json",
    "summary": "openenv.rollout-summary.json",
}

ARTIFACT_PATHS: Final[dict[str, str]] = {
    **_BUNDLE,
    "train_receipt": "train_receipt.json",
    "adapter_manifest": "adapter_manifest.json",
    **{
        f"environment_eval_{side}_{kind}": f"{EVALUATION_DIR}/{side}/{name}"
        for side in ("baseline", "candidate")
        for kind, name in _BUNDLE.items()
    },
    "environment_eval_receipt": f"{EVALUATION_DIR}/receipt.json",
}
"""Every artifact kind of Kiln's run status, in manifest order, and its relative path."""


def artifact_path(kind: str) -> str:
    """The relative path of ``kind``; ``KeyError`` for a kind Kiln does not define."""
    return ARTIFACT_PATHS[kind]
