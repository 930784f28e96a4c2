"""Byte-exact writing and reading of the three bundle files and the reports."""

from __future__ import annotations

import io
import json

import pytest

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import dumps_compact
from kiln_verify.openenv.protocol.wire import (
    Observation,
    ProtocolError,
    Reward,
    decode_server_frame,
)
from kiln_verify.openenv.records import serialize
from kiln_verify.openenv.records.environment import EnvironmentIdentityRecord
from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import ObservationResult, ReplayManifest, read_replay
from kiln_verify.openenv.records.reports import (
    ArtifactDownloadReceipt,
    ReplayRunReport,
    VerificationReport,
)
from kiln_verify.openenv.records.rollout import AgenticGroup, iter_rollout_lines
from kiln_verify.openenv.records.summary import read_summary
from tests.openenv.records import fixtures


def test_rollout_line_is_compact_json_plus_lf() -> None:
    data = fixtures.dataset_file()
    assert data.endswith(b"}\n")
    assert data.count(b"\n") == 1
    assert b'"reward":0.0' in data
    assert b", " not in data.split(b'"content"')[0]
    # Key order follows the struct order documented in the reference (§3.1, §3.2).
    line = json.loads(data)
    assert list(line) == ["messages", "completions"]
    completion = line["completions"][0]
    assert list(completion) == ["text", "reward", "trajectory", "openenv"]
    assert list(completion["openenv"]) == [
        "schema", "environment_name", "environment_base_url", "openapi_version",
        "discovery_sha256", "environment_schema_sha256", "action_schema_sha256",
        "behavior_policy", "reset_sha256", "seed", "steps", "episode_return",
        "terminal_done", "termination",
    ]  # fmt: skip
    assert list(completion["trajectory"][0]) == ["role", "content", "kind"]


def test_corpus_round_trip_streams_with_line_numbers() -> None:
    data = fixtures.dataset_file() * 3
    lines = list(iter_rollout_lines(io.BytesIO(data), "corpus.jsonl"))
    assert [line.number for line in lines] == [1, 2, 3]
    assert serialize.dataset_bytes(line.group for line in lines) == data
    assert all(serialize.rollout_line_bytes(line.group) == line.raw + b"\n" for line in lines)


def test_dataset_hasher_matches_file_digest() -> None:
    group = AgenticGroup.from_json(fixtures.group_json())
    hasher = serialize.DatasetHasher()
    written = hasher.add(group) + hasher.add(group)
    assert hasher.sha256 == sha256_bytes(written)
    assert hasher.size == len(written)
    assert hasher.lines == 2


def test_completions_alias_rollouts_is_read_and_written_as_completions() -> None:
    value = fixtures.group_json()
    value["rollouts"] = value.pop("completions")
    group = AgenticGroup.from_json(value)
    assert serialize.rollout_line_bytes(group) == fixtures.dataset_file()


def test_replay_round_trip_is_byte_exact() -> None:
    data = fixtures.replay_file()
    manifest = read_replay(data, "openenv.replay.json")
    assert serialize.replay_bytes(manifest) == data
    assert data.startswith(b'{\n  "schema": "kiln.openenv-replay.v1",\n  "client_profile"')
    assert data.endswith(b"\n}\n")
    assert manifest.exchange_count() == 2
    candidate = manifest.groups[0].candidates[0]
    assert candidate.has_final_state
    assert not candidate.ended_by_terminal_code
    reward = manifest.groups[0].candidates[0].exchanges[1].result
    assert isinstance(reward, ObservationResult)
    assert reward.observation.reward == Reward("integer", 1)
    assert reward.observation.reward != Reward("float", 1.0)


def test_replay_final_state_absent_null_and_present_are_distinct() -> None:
    base = fixtures.replay_json()
    candidate = base["groups"][0]["candidates"][0]
    for state in ({"pulls": 1}, None):
        candidate["final_state"] = state
        manifest = ReplayManifest.from_json(base)
        assert (
            json.loads(serialize.replay_bytes(manifest))["groups"][0]["candidates"][0][
                "final_state"
            ]
            == state
        )
    del candidate["final_state"]
    manifest = ReplayManifest.from_json(base)
    written = json.loads(serialize.replay_bytes(manifest))
    assert "final_state" not in written["groups"][0]["candidates"][0]
    assert not manifest.groups[0].candidates[0].has_final_state


def test_free_form_values_are_written_with_sorted_keys() -> None:
    base = fixtures.replay_json()
    base["groups"][0]["reset_payload"] = {"seed": 71, "difficulty": "hard"}
    base["groups"][0]["candidates"][0]["exchanges"][1]["action"] = {"z": {"b": 1, "a": 2}, "arm": 0}
    data = serialize.replay_bytes(ReplayManifest.from_json(base))
    text = data.decode()
    payload = text[text.index('"reset_payload"') : text.index('"reset_observation"')]
    assert payload.index('"difficulty"') < payload.index('"seed": 71')
    assert text.index('"arm": 0') < text.index('"z"')
    assert text.index('"a": 2') < text.index('"b"')


def test_summary_round_trip_is_byte_exact() -> None:
    data = fixtures.summary_file()
    summary = read_summary(data, "openenv.rollout-summary.json")
    assert serialize.summary_bytes(summary) == data
    assert summary.version == 5
    keys = list(json.loads(data))
    assert keys[:5] == ["schema", "kiln_url", "adapter", "adapter_label", "behavior_policy"]
    assert keys.index("capacity_wait_seconds") + 1 == keys.index("reset_plan_sha256")
    assert keys[-2:] == ["stats", "rollouts"]
    assert b'"adapter": null' in data
    assert b'"temperature": 1.0' in data


def test_summary_optional_fields_keep_struct_order() -> None:
    value = fixtures.summary_json()
    value["thinking_budget_tokens"] = 128
    value["training_selection"] = {
        "groups_submitted": 1,
        "rollouts_submitted": 1,
        "no_output_rollouts_discarded": 0,
        "no_usable_output_groups_skipped": 0,
        "no_reward_gradient_groups_skipped": 0,
    }
    value["training_contract"] = {
        "schema": "kiln.openenv-training-contract.v1",
        "effective_config": {
            "output_name": "out",
            "base_adapter": None,
            "behavior_policy": "no_importance_correction",
        },
        "behavior_policy": dict(fixtures.BEHAVIOR),
    }
    value["training_submission"] = {"job_id": "j1", "status": "queued"}
    data = json.dumps(value).encode()
    summary = read_summary(data)
    keys = list(json.loads(serialize.summary_bytes(summary)))
    assert keys.index("max_action_tokens") + 1 == keys.index("thinking_budget_tokens")
    assert keys[-3:] == ["training_selection", "training_contract", "training_submission"]
    # effective_config keeps the order it was read in (a typed Kiln struct).
    written = json.loads(serialize.summary_bytes(summary))
    assert list(written["training_contract"]["effective_config"]) == [
        "output_name", "base_adapter", "behavior_policy",
    ]  # fmt: skip


def test_identity_record_converts_to_and_from_live_identity() -> None:
    record = EnvironmentIdentityRecord.from_json(fixtures.inspection()["identity"])
    live = record.to_identity()
    assert EnvironmentIdentityRecord.from_identity(live) == record
    legacy = dict(fixtures.inspection()["identity"])
    del legacy["authentication"], legacy["discovery_sha256"]
    old = EnvironmentIdentityRecord.from_json(legacy)
    assert old.authentication_method == "none"
    assert "authentication" not in old.to_json()


def test_observation_reward_tags_survive_round_trip() -> None:
    for reward, text in (
        (None, b"null"),
        (True, b"true"),
        (1, b"1"),
        (1.0, b"1.0"),
        (-0.0, b"-0.0"),
    ):
        record = ObservationRecord.from_json({"observation": {}, "reward": reward, "done": False})
        assert dumps_compact(record.to_json()) == (
            b'{"observation":{},"reward":' + text + b',"done":false}'
        )


@pytest.mark.parametrize(
    ("model", "value"),
    [
        (
            VerificationReport,
            {
                "schema": "kiln.openenv-verification.v1",
                "summary_path": "s.json",
                "dataset_path": "d.jsonl",
                "replay_path": "r.json",
                "dataset_sha256": fixtures.D,
                "replay_sha256": fixtures.D,
                "groups": 1,
                "rollouts": 1,
                "environment_exchanges": 2,
            },
        ),
        (
            ReplayRunReport,
            {
                "schema": "kiln.openenv-replay-run.v1",
                "replay_sha256": fixtures.D,
                "environments": 1,
                "groups": 1,
                "rollouts": 1,
                "environment_exchanges": 2,
                "capacity_retries": 0,
                "environment_prefix_only_rollouts": 0,
            },
        ),
        (
            ArtifactDownloadReceipt,
            {
                "schema": "kiln.openenv-artifact-download.v1",
                "run_id": "0f8fad5b-d9cb-469f-a165-70867728950e",
                "kind": "summary",
                "source_url": (
                    "/v1/openenv/runs/0f8fad5b-d9cb-469f-a165-70867728950e/artifacts/summary"
                ),
                "output_path": "openenv.rollout-summary.json",
                "sha256": fixtures.D,
                "bytes": 10,
            },
        ),
        (
            EnvironmentEvaluationReceipt,
            {
                "schema": "kiln.openenv-environment-evaluation.v1",
                "run_id": "r",
                "config": {"groups": 20, "group_size": 1, "gate": {"min_mean_improvement": 0.0}},
                "seed_start": 100,
                "baseline": {},
                "candidate": {"adapter": "a", "adapter_content_revision": fixtures.D},
                "baseline_summary_sha256": fixtures.D,
                "candidate_summary_sha256": fixtures.D,
                "evidence": {
                    "policy_version": "paired_return_sign_test_v1",
                    "paired_groups": 20,
                    "paired_episodes": 20,
                    "minimum_paired_groups": 20,
                    "baseline_mean_return": 0.0,
                    "candidate_mean_return": 1.0,
                    "mean_return_improvement": 1.0,
                    "improved_groups": 20,
                    "regressed_groups": 0,
                    "tied_groups": 0,
                    "exact_sign_test_p_value": 0.0000019073486328125,
                    "exact_sign_test_alpha": 0.05,
                    "decision": "passed",
                    "reason": "significant",
                },
                "outcome": "promoted",
                "verdict": "promoted",
            },
        ),
    ],
)
def test_reports_round_trip(model: type[VerificationReport], value: dict[str, object]) -> None:
    record = model.from_json(value)
    data = serialize.report_bytes(record)
    assert json.loads(data) == value
    assert serialize.report_bytes(model.from_json(json.loads(data))) == data
    assert list(json.loads(data)) == list(value)


def test_records_from_wire_frames() -> None:
    frame = decode_server_frame(
        '{"type":"observation","data":{"observation":{"b":1,"a":2},"reward":1,"done":false}}'
    )
    assert isinstance(frame, Observation)
    record = ObservationRecord.from_wire(frame)
    assert dumps_compact(record.to_json()) == (
        b'{"observation":{"a":2,"b":1},"reward":1,"done":false}'
    )
    error = decode_server_frame(
        '{"type":"error","data":{"code":"CAPACITY_REACHED","message":"full","max_sessions":2}}'
    )
    assert isinstance(error, ProtocolError)
    recorded = ProtocolErrorRecord.from_wire(error)
    assert recorded.to_json() == {"code": "CAPACITY_REACHED", "message": "full", "max_sessions": 2}
    assert not recorded.recoverable
