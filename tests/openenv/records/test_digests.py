"""Every §4 digest preimage, recomputed independently with hashlib and json."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.openenv.protocol.identity import DiscoveryDocuments
from kiln_verify.openenv.records import serialize
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.replay import ReplayManifest
from kiln_verify.records import ChatMessage
from tests.openenv.records import fixtures


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _sorted_compact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_reset_payloads_of_the_e2e_example() -> None:
    templates = [{"difficulty": "hard"}, {"split": "train"}]
    first = serialize.effective_reset_payload(templates[0], 71)
    second = serialize.effective_reset_payload(templates[1], 72)
    assert json.dumps(first, separators=(",", ":")) == '{"difficulty":"hard","seed":71}'
    assert json.dumps(second, separators=(",", ":")) == '{"seed":72,"split":"train"}'
    assert serialize.effective_reset_payload({"difficulty": 3, "seed": 999}, 7) == {
        "difficulty": 3,
        "seed": 7,
    }
    assert serialize.seed_free_template(second) == {"split": "train"}


def test_reset_sha256_is_compact_json_of_effective_payload() -> None:
    payload = {"split": "train", "seed": 72, "nested": {"b": [1, 2.5], "a": "é"}}
    assert str(serialize.reset_sha256(payload)) == _sha(_sorted_compact(payload))
    assert str(serialize.reset_sha256({"seed": 71})) == _sha(b'{"seed":71}')


def test_reset_plan_sha256_is_the_template_array() -> None:
    templates = [{"difficulty": "hard"}, {}]
    assert str(serialize.reset_plan_sha256(templates)) == _sha(b'[{"difficulty":"hard"},{}]')
    with pytest.raises(KilnError) as info:
        serialize.reset_plan_sha256([{"seed": 1}])
    assert info.value.code == "record_invalid"


def test_action_and_schema_digests() -> None:
    assert str(serialize.action_schema_sha256(fixtures.ACTION_SCHEMA)) == _sha(
        b'{"properties":{"arm":{"type":"integer"}},"required":["arm"],"type":"object"}'
    )
    assert str(serialize.schema_sha256(fixtures.SCHEMA_DOC)) == _sha(
        _sorted_compact(fixtures.SCHEMA_DOC)
    )


def test_discovery_sha256_preimage() -> None:
    documents = DiscoveryDocuments(
        metadata={"name": "E", "x-extra": 1},
        environment_schema=fixtures.SCHEMA_DOC,
        environments=["e"],
        openapi={"info": {"version": "1.0.0"}},
    )
    preimage = {
        "schema": "kiln.openenv-discovery.v1",
        "metadata": {"name": "E", "x-extra": 1},
        "environment_schema": fixtures.SCHEMA_DOC,
        "environments": ["e"],
        "openapi": {"info": {"version": "1.0.0"}},
    }
    assert str(serialize.discovery_sha256(documents)) == _sha(_sorted_compact(preimage))


def test_file_digests_are_over_exact_bytes() -> None:
    dataset = fixtures.dataset_file()
    replay = fixtures.replay_file(dataset)
    summary = json.loads(fixtures.summary_file())
    assert summary["dataset_sha256"] == _sha(dataset)
    assert summary["dataset_bytes"] == len(dataset)
    assert summary["replay_sha256"] == _sha(replay)
    assert json.loads(replay)["dataset_sha256"] == _sha(dataset)
    data = fixtures.summary_file()
    assert str(serialize.summary_file_sha256(data)) == _sha(data)


def test_pretty_bytes_follow_serde_json_pretty() -> None:
    replay = fixtures.replay_file()
    value = json.loads(replay)
    expected = json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"
    assert replay == expected  # no float here needs format_float beyond Python's repr


def test_group_integrity_hashes() -> None:
    messages = [ChatMessage(role="system", content="s"), ChatMessage(role="user", content="u")]
    assert str(serialize.messages_sha256(messages)) == _sha(
        b'[{"role":"system","content":"s"},{"role":"user","content":"u"}]'
    )
    observation = ObservationRecord.from_json(fixtures.RESET_OBSERVATION)
    assert str(serialize.reset_observation_sha256(observation)) == _sha(
        b'{"observation":{"input_text":"Pick an arm.","pulls":0},"reward":null,"done":false}'
    )


def test_group_plan_sha256_preimage() -> None:
    item = {
        "seed": 71,
        "rollouts": 2,
        "group_index": 1,
        "environment_name": "BanditEnvironment",
        "environment_base_url": "http://127.0.0.1:18991",
        "openapi_version": None,
        "discovery_sha256": fixtures.D,
        "environment_schema_sha256": fixtures.D,
        "action_schema_sha256": fixtures.D,
        "reset_sha256": fixtures.D,
    }
    body = (
        '{"schema":"kiln.openenv-group-plan-item.v1","group_index":1,'
        '"environment_name":"BanditEnvironment","environment_base_url":"http://127.0.0.1:18991",'
        f'"openapi_version":null,"discovery_sha256":"{fixtures.D}",'
        f'"environment_schema_sha256":"{fixtures.D}","action_schema_sha256":"{fixtures.D}",'
        f'"reset_sha256":"{fixtures.D}","seed":71,"rollouts":2}}'
    ).encode()
    preimage = b"kiln.openenv-group-plan.v1\0"
    for _ in range(2):
        preimage += struct.pack(">Q", len(body)) + body
    assert str(serialize.group_plan_sha256([item, item])) == _sha(preimage)
    assert serialize.group_plan_sha256([item]) != serialize.group_plan_sha256([item, item])


def test_float_spelling_in_records() -> None:
    value = fixtures.replay_json()
    value["protocol_error_reward"] = 1e-5
    value["groups"][0]["candidates"][0]["model_latency_ms"] = 1e16
    data = serialize.replay_bytes(ReplayManifest.from_json(value))
    assert b'"protocol_error_reward": 0.00001,' in data
    assert b'"model_latency_ms": 1e+16\n' in data
