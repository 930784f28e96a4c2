"""The run directory's layout table agrees with the collector's names and Kiln's kinds."""

from __future__ import annotations

from kiln_verify.control.layout import ARTIFACT_PATHS, EVALUATION_DIR, artifact_path
from kiln_verify.openenv.collect.controls import DEFAULT_DATASET, DEFAULT_REPLAY, DEFAULT_SUMMARY
from kiln_verify.openenv.training.evidence_io import TRAIN_RECEIPT_FILE

#: §12's artifact kinds, in the order Kiln's run status lists them.
KILN_KINDS = [
    "dataset", "replay", "summary", "train_receipt", "adapter_manifest",
    "environment_eval_baseline_dataset", "environment_eval_baseline_replay",
    "environment_eval_baseline_summary", "environment_eval_candidate_dataset",
    "environment_eval_candidate_replay", "environment_eval_candidate_summary",
    "environment_eval_receipt",
]  # fmt: skip


def test_every_kiln_kind_in_order() -> None:
    assert list(ARTIFACT_PATHS) == KILN_KINDS


def test_the_bundle_keeps_the_collector_names() -> None:
    assert [artifact_path(k) for k in ("dataset", "replay", "summary")] == [
        DEFAULT_DATASET, DEFAULT_REPLAY, DEFAULT_SUMMARY,
    ]  # fmt: skip
    assert artifact_path("train_receipt") == TRAIN_RECEIPT_FILE
    assert artifact_path("environment_eval_candidate_summary") == (
        f"{EVALUATION_DIR}/candidate/{DEFAULT_SUMMARY}"
    )


def test_paths_are_relative_distinct_and_plain() -> None:
    paths = list(ARTIFACT_PATHS.values())
    assert len(set(paths)) == len(paths)
    for path in paths:
        parts = path.split("/")
        assert not path.startswith("/")
        assert ".." not in parts
        assert "" not in parts
