"""The replay report is Kiln's closed record; our notes sit beside it: exact bytes, closed."""

from __future__ import annotations

from typing import Any

import pytest

from kiln_verify.errors import RecordInvalid
from kiln_verify.openenv.records.reports import (
    REPLAY_NOTES_SCHEMA,
    EnvironmentRemap,
    ReplayRunNotes,
    ReplayRunReport,
    ReplayRunResult,
)
from kiln_verify.openenv.records.serialize import report_bytes
from kiln_verify.records import validate_record

DIGEST = "sha256:" + "ab" * 32
PLAIN: dict[str, Any] = {
    "schema": "kiln.openenv-replay-run.v1",
    "replay_sha256": DIGEST,
    "environments": 1,
    "groups": 1,
    "rollouts": 2,
    "environment_exchanges": 4,
    "capacity_retries": 0,
    "environment_prefix_only_rollouts": 0,
}
REMAP: dict[str, Any] = {
    "environment_index": 0,
    "recorded_base_url": "http://127.0.0.1:41143",
    "base_url": "http://127.0.0.1:33019",
    "source": "oracle",
    "oracle": "bandit",
}
NOTES: dict[str, Any] = {
    "schema": "kiln-verify.replay-run-notes.v1",
    "volatile": ["final_state.episode_id"],
    "environment_remaps": [REMAP],
}


def test_the_report_is_exactly_the_reference_record() -> None:
    report = validate_record(ReplayRunReport, PLAIN)
    assert list(report.to_json()) == list(PLAIN)
    assert report.to_json() == PLAIN


def test_the_result_puts_our_notes_beside_the_report_byte_for_byte() -> None:
    document = {"report": PLAIN, "kiln_verify": NOTES}
    result = validate_record(ReplayRunResult, document)
    assert result.notes.environment_remaps == [EnvironmentRemap(**REMAP)]
    assert result.to_json() == document
    assert report_bytes(result) == (
        b'{\n  "report": {\n    "schema": "kiln.openenv-replay-run.v1",\n'
        b'    "replay_sha256": "' + DIGEST.encode() + b'",\n'
        b'    "environments": 1,\n    "groups": 1,\n    "rollouts": 2,\n'
        b'    "environment_exchanges": 4,\n    "capacity_retries": 0,\n'
        b'    "environment_prefix_only_rollouts": 0\n  },\n'
        b'  "kiln_verify": {\n    "schema": "kiln-verify.replay-run-notes.v1",\n'
        b'    "volatile": [\n      "final_state.episode_id"\n    ],\n'
        b'    "environment_remaps": [\n      {\n        "environment_index": 0,\n'
        b'        "recorded_base_url": "http://127.0.0.1:41143",\n'
        b'        "base_url": "http://127.0.0.1:33019",\n'
        b'        "source": "oracle",\n        "oracle": "bandit"\n      }\n    ]\n  }\n}\n'
    )
    moved = {key: value for key, value in REMAP.items() if key != "oracle"}
    moved["source"] = "environment_url"
    assert "oracle" not in validate_record(EnvironmentRemap, moved).to_json()


def test_empty_notes_are_written_not_omitted() -> None:
    notes = ReplayRunNotes(schema=REPLAY_NOTES_SCHEMA, volatile=[], environment_remaps=[])
    assert notes.to_json() == {
        "schema": "kiln-verify.replay-run-notes.v1",
        "volatile": [],
        "environment_remaps": [],
    }


@pytest.mark.parametrize(
    "extra",
    [
        {"volatile": ["final_state.episode_id"]},
        {"environment_remaps": [REMAP]},
        {"volatile": None},
        {"strict_state": True},
    ],
)
def test_the_report_stays_closed(extra: dict[str, Any]) -> None:
    with pytest.raises(RecordInvalid):
        validate_record(ReplayRunReport, {**PLAIN, **extra})


@pytest.mark.parametrize(
    "change",
    [
        {"schema": "kiln.openenv-replay-run.v1"},
        {"volatile": None},
        {"environment_remaps": None},
        {"environment_remaps": [{**REMAP, "source": "guess"}]},
        {"environment_remaps": [{**REMAP, "oracle": None}]},
        {"environment_remaps": [{**REMAP, "port": 1}]},
        {"volatile": [""]},
        {"strict_state": True},
    ],
)
def test_the_notes_stay_closed(change: dict[str, Any]) -> None:
    with pytest.raises(RecordInvalid):
        validate_record(ReplayRunNotes, {**NOTES, **change})
    missing = {key: value for key, value in NOTES.items() if key != "volatile"}
    with pytest.raises(RecordInvalid):
        validate_record(ReplayRunNotes, missing)


def test_the_result_holds_exactly_two_keys() -> None:
    with pytest.raises(RecordInvalid):
        validate_record(ReplayRunResult, {"report": PLAIN})
    with pytest.raises(RecordInvalid):
        validate_record(ReplayRunResult, {"report": PLAIN, "kiln_verify": NOTES, "more": 1})
    with pytest.raises(RecordInvalid):
        validate_record(
            ReplayRunResult, {"report": {**PLAIN, "volatile": ["x"]}, "kiln_verify": NOTES}
        )
