"""A small, fully consistent bundle built from the reference's §16 JSON examples."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from kiln_verify.core.digest import canonical_digest, sha256_bytes
from kiln_verify.openenv.records import serialize
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.prompt import (
    initial_messages,
    observation_content,
    protocol_error_content,
)
from kiln_verify.openenv.records.replay import ReplayManifest
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.testing.bundles import DATASET, REPLAY, SUMMARY, FixtureBundle

D = "sha256:" + "d" * 64
ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"arm": {"type": "integer"}},
    "required": ["arm"],
}
SCHEMA_DOC: dict[str, Any] = {
    "action": ACTION_SCHEMA,
    "observation": {"type": "object"},
    "state": {"type": "object"},
}
BEHAVIOR: dict[str, Any] = {
    "served_model_id": "m",
    "base_model_sha256": "sha256:" + "a" * 64,
    "inference_config_sha256": "sha256:" + "b" * 64,
    "implementation": "kiln/x",
}


def inspection() -> dict[str, Any]:
    return {
        "identity": {
            "schema": "kiln.openenv-identity.v1",
            "client_profile": "openenv-http/1.x",
            "base_url": "http://127.0.0.1:18991",
            "websocket_url": "ws://127.0.0.1:18991/ws",
            "authentication": "none",
            "openapi_version": "1.0.0",
            "environments": ["bandit_env"],
            "metadata": {"name": "BanditEnvironment", "description": "A bandit."},
            "schema_sha256": str(canonical_digest(SCHEMA_DOC)),
            "discovery_sha256": D,
        },
        "schema": copy.deepcopy(SCHEMA_DOC),
    }


RESET_OBSERVATION: dict[str, Any] = {
    "observation": {"input_text": "Pick an arm.", "pulls": 0},
    "reward": None,
    "done": False,
}
ERROR = {"code": "EXECUTION_ERROR", "message": "arm 99 out of range"}
STEP_OBSERVATION: dict[str, Any] = {
    "observation": {"last_arm": 0, "pulls": 1},
    "reward": 1,
    "done": False,
}


def replay_json(dataset_sha256: str = D) -> dict[str, Any]:
    return {
        "schema": "kiln.openenv-replay.v1",
        "client_profile": "openenv-http/1.x",
        "dataset_sha256": dataset_sha256,
        "protocol_error_reward": -1.0,
        "max_steps": 2,
        "environments": [inspection()],
        "groups": [
            {
                "group_index": 0,
                "environment_index": 0,
                "seed": 71,
                "reset_payload": {"difficulty": "hard", "seed": 71},
                "reset_observation": copy.deepcopy(RESET_OBSERVATION),
                "candidates": [
                    {
                        "candidate_index": 0,
                        "exchanges": [
                            {
                                "step_index": 0,
                                "action": {"arm": 99},
                                "result": {
                                    "kind": "protocol_error",
                                    "error": dict(ERROR),
                                    "continued": True,
                                },
                            },
                            {
                                "step_index": 1,
                                "action": {"arm": 0},
                                "result": {
                                    "kind": "observation",
                                    "observation": copy.deepcopy(STEP_OBSERVATION),
                                },
                            },
                        ],
                        "final_state": {"pulls": 1},
                        "episode_return": 0.0,
                        "terminal_done": False,
                        "termination": "max_steps",
                        "recoverable_protocol_errors": 1,
                        "capacity_retries": 1,
                        "model_tokens": 8,
                        "model_latency_ms": 3.2,
                    }
                ],
            }
        ],
    }


def group_json() -> dict[str, Any]:
    insp = EnvironmentInspection.from_json(inspection())
    messages = initial_messages(insp, ObservationRecord.from_json(RESET_OBSERVATION))
    error = protocol_error_content(ProtocolErrorRecord.from_json(ERROR), continued=True)
    step = observation_content("step result", ObservationRecord.from_json(STEP_OBSERVATION))
    return {
        "messages": [message.to_json() for message in messages],
        "completions": [
            {
                "text": '{"arm":99}<TURN_BREAK>{"arm":0}',
                "reward": 0.0,
                "trajectory": [
                    {"role": "assistant", "content": '{"arm":99}', "kind": "action"},
                    {
                        "role": "tool",
                        "content": error,
                        "kind": "observation",
                        "warning_prefix_len": len(error.encode()),
                    },
                    {"role": "assistant", "content": '{"arm":0}', "kind": "action"},
                    {"role": "tool", "content": step, "kind": "observation"},
                ],
                "openenv": {
                    "schema": "kiln.openenv-rollout.v1",
                    "environment_name": "BanditEnvironment",
                    "environment_base_url": "http://127.0.0.1:18991",
                    "openapi_version": "1.0.0",
                    "discovery_sha256": D,
                    "environment_schema_sha256": str(canonical_digest(SCHEMA_DOC)),
                    "action_schema_sha256": str(serialize.action_schema_sha256(ACTION_SCHEMA)),
                    "behavior_policy": dict(BEHAVIOR),
                    "reset_sha256": str(serialize.reset_sha256({"difficulty": "hard", "seed": 71})),
                    "seed": 71,
                    "steps": 2,
                    "episode_return": 0.0,
                    "terminal_done": False,
                    "termination": "max_steps",
                },
            }
        ],
    }


def summary_json(dataset: bytes | None = None, replay: bytes | None = None) -> dict[str, Any]:
    dataset = dataset if dataset is not None else dataset_file()
    replay = replay if replay is not None else replay_file(dataset)
    return {
        "schema": "kiln.openenv-rollout-summary.v5",
        "kiln_url": "http://127.0.0.1:8420",
        "adapter": None,
        "adapter_label": "base",
        "behavior_policy": dict(BEHAVIOR),
        "environments": [inspection()],
        "groups": 1,
        "group_size": 1,
        "rollout_count": 1,
        "seed_start": 71,
        "max_steps": 2,
        "concurrency": 1,
        "max_action_tokens": 256,
        "temperature": 1.0,
        "thinking": True,
        "protocol_error_reward": -1.0,
        "max_recoverable_errors": 3,
        "capacity_wait_seconds": 300,
        "reset_plan_sha256": str(serialize.reset_plan_sha256([{"difficulty": "hard"}])),
        "output_path": "openenv.rollouts.jsonl",
        "replay_output_path": "openenv.replay.json",
        "summary_output_path": "openenv.rollout-summary.json",
        "dataset_sha256": str(sha256_bytes(dataset)),
        "dataset_bytes": len(dataset),
        "replay_sha256": str(sha256_bytes(replay)),
        "replay_bytes": len(replay),
        "stats": {
            "mean_episode_return": 0.0,
            "min_episode_return": 0.0,
            "max_episode_return": 0.0,
            "done_count": 0,
            "max_steps_count": 1,
            "invalid_model_action_count": 0,
            "protocol_error_count": 0,
            "recoverable_protocol_error_count": 1,
            "capacity_retry_count": 1,
            "total_environment_steps": 2,
            "total_model_tokens": 8,
            "mean_model_latency_ms": 3.2,
        },
        "rollouts": [
            {
                "group_index": 0,
                "candidate_index": 0,
                "environment_name": "BanditEnvironment",
                "environment_url": "http://127.0.0.1:18991",
                "seed": 71,
                "steps": 2,
                "episode_return": 0.0,
                "terminal_done": False,
                "termination": "max_steps",
                "recoverable_protocol_errors": 1,
                "capacity_retries": 1,
                "model_tokens": 8,
                "model_latency_ms": 3.2,
            }
        ],
    }


def dataset_file() -> bytes:
    return serialize.dataset_bytes([AgenticGroup.from_json(group_json())])


def replay_file(dataset: bytes | None = None) -> bytes:
    dataset = dataset if dataset is not None else dataset_file()
    manifest = ReplayManifest.from_json(replay_json(str(sha256_bytes(dataset))))
    return serialize.replay_bytes(manifest)


def summary_file() -> bytes:
    return serialize.summary_bytes(RolloutSummary.from_json(summary_json()))


def write_fixture_bundle(directory: Path) -> FixtureBundle:
    """This module's reference-example bundle, as the three files of a bundle."""
    directory.mkdir(parents=True, exist_ok=True)
    dataset = dataset_file()
    (directory / DATASET).write_bytes(dataset)
    (directory / REPLAY).write_bytes(replay_file(dataset))
    (directory / SUMMARY).write_bytes(summary_file())
    return FixtureBundle(directory, directory / DATASET, directory / REPLAY, directory / SUMMARY)
