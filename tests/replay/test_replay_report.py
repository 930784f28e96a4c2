"""The replay report's two optional fields: exact bytes, closed, omitted rather than empty."""

from __future__ import annotations

from typing import Any

import pytest

from kiln_verify.errors import RecordInvalid
from kiln_verify.openenv.records.reports import EnvironmentRemap, ReplayRunReport
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


def test_a_plain_report_is_exactly_the_reference_record() -> None:
    report = validate_record(ReplayRunReport, PLAIN)
    assert report.volatile is None
    assert report.environment_remaps is None
    assert list(report.to_json()) == list(PLAIN)


def test_volatile_and_remaps_round_trip_byte_for_byte() -> None:
    document = {**PLAIN, "volatile": ["final_state.episode_id"], "environment_remaps": [REMAP]}
    report = validate_record(ReplayRunReport, document)
    assert report.environment_remaps == [EnvironmentRemap(**REMAP)]
    assert report.to_json() == document
    assert report_bytes(report) == (
        b'{\n  "schema": "kiln.openenv-replay-run.v1",\n'
        b'  "replay_sha256": "' + DIGEST.encode() + b'",\n'
        b'  "environments": 1,\n  "groups": 1,\n  "rollouts": 2,\n'
        b'  "environment_exchanges": 4,\n  "capacity_retries": 0,\n'
        b'  "environment_prefix_only_rollouts": 0,\n'
        b'  "volatile": [\n    "final_state.episode_id"\n  ],\n'
        b'  "environment_remaps": [\n    {\n      "environment_index": 0,\n'
        b'      "recorded_base_url": "http://127.0.0.1:41143",\n'
        b'      "base_url": "http://127.0.0.1:33019",\n'
        b'      "source": "oracle",\n      "oracle": "bandit"\n    }\n  ]\n}\n'
    )
    moved = {key: value for key, value in REMAP.items() if key != "oracle"}
    moved["source"] = "environment_url"
    assert "oracle" not in validate_record(EnvironmentRemap, moved).to_json()


@pytest.mark.parametrize(
    "extra",
    [
        {"volatile": None},
        {"volatile": []},
        {"environment_remaps": None},
        {"environment_remaps": []},
        {"environment_remaps": [{**REMAP, "source": "guess"}]},
        {"environment_remaps": [{**REMAP, "oracle": None}]},
        {"environment_remaps": [{**REMAP, "port": 1}]},
        {"strict_state": True},
    ],
)
def test_the_report_stays_closed(extra: dict[str, Any]) -> None:
    with pytest.raises(RecordInvalid):
        validate_record(ReplayRunReport, {**PLAIN, **extra})
