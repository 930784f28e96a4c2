"""Synthetic, fully consistent rollout bundles for the verifier's tests and benchmark.

:func:`build_fixture_bundle` plays a scripted deterministic episode per candidate against two
recorded environments and writes the three files exactly as a collector would, through
the records package (prompt texts, digests, serializations). Candidate ``c`` of group
``g`` follows script ``(g + c) % 5``:

0. ``done``: a float reward, then an integer reward with ``done = true``;
1. ``max_steps``: ``max_steps`` observations with null / boolean rewards;
2. ``protocol_error``: a continued ``EXECUTION_ERROR`` then a terminal ``SESSION_ERROR``
   (no final state);
3. ``invalid_model_action``: one observation then an invalid reply (by default a
   schema-invalid action, ``ACTION_SCHEMA_VALIDATION_FAILED``, reference §17; see
   ``tail_replies``);
4. ``protocol_error`` by budget: two recoverable errors with ``max_recoverable_errors = 1``.

``pad`` adds that many characters of text to every observation and ``reasoning`` that many
to the model's reasoning before every action's ``</think>`` (the two bundle size knobs: the
first grows the replay and, for the JSON-rendered environment, the corpus; the second only
the corpus, as a thinking model's text does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln_verify.core.digest import canonical_digest
from kiln_verify.core.jsonio import dumps_compact
from kiln_verify.openenv.records import serialize
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.prompt import (
    action_content,
    harness_error_segment,
    initial_messages,
    judge_model_reply,
    observation_segment,
    protocol_error_segment,
)
from kiln_verify.openenv.records.replay import ReplayManifest
from kiln_verify.openenv.records.rollout import TURN_BREAK, AgenticGroup
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.openenv.verify.stats import compute_stats
from kiln_verify.openenv.verify.tails import TailRules
from kiln_verify.records import TurnSegment

DATASET = "openenv.rollouts.jsonl"
REPLAY = "openenv.replay.json"
SUMMARY = "openenv.rollout-summary.json"
PENALTY = -1.0
MAX_STEPS = 3
MAX_RECOVERABLE = 1
BEHAVIOR: dict[str, Any] = {
    "served_model_id": "scripted",
    "base_model_sha256": "sha256:" + "a" * 64,
    "inference_config_sha256": "sha256:" + "b" * 64,
    "implementation": "kiln-verify/scripted",
}


def _inspection(index: int, label: str = "") -> dict[str, Any]:
    action = {
        "type": "object",
        "properties": {"arm": {"type": "integer"}},
        "required": ["arm"],
    }
    schema_doc = {"action": action, "observation": {"type": "object"}, "state": {"type": "object"}}
    port = 18990 + index
    return {
        "identity": {
            "schema": "kiln.openenv-identity.v1",
            "client_profile": "openenv-http/1.x",
            "base_url": f"http://127.0.0.1:{port}",
            "websocket_url": f"ws://127.0.0.1:{port}/ws",
            "authentication": "none",
            "openapi_version": "1.0.0" if index == 0 else None,
            "environments": [f"env_{index}"],
            "metadata": {
                "name": f"ScriptedEnvironment{index}{label}",
                "description": f"Scripted.{label}",
            },
            "schema_sha256": str(canonical_digest(schema_doc)),
            "discovery_sha256": "sha256:" + f"{index:x}" * 64,
        },
        "schema": schema_doc,
    }


TEMPLATES: list[dict[str, Any]] = [{"difficulty": "hard"}, {"split": "train", "level": 2}]
SCHEMA_TAIL: tuple[tuple[str, str | None], ...] = (('{"arm":"two"}', "r"),)
"""The default invalid tail: a schema-invalid action (``ACTION_SCHEMA_VALIDATION_FAILED``)."""
EVERY_TAIL: tuple[tuple[str, str | None], ...] = (
    ('{"arm":"two"}', "r"),  # ACTION_SCHEMA_VALIDATION_FAILED
    ("pull arm 2", "r"),  # INVALID_MODEL_ACTION
    ("  \n", 'still thinking about {"arm": 1}'),  # MODEL_ACTION_NO_OUTPUT
    ('```json\n{"arm": 1.5, "x": 1}\n```', None),  # two schema issues, fenced
    ('{"arm": 1} and more', ""),  # INVALID_MODEL_ACTION: trailing text
    ("", None),  # MODEL_ACTION_NO_OUTPUT, nothing at all
)
"""One reply of every harness kind, for :func:`build_fixture_bundle`'s ``tail_replies``."""


@dataclass
class FixtureBundle:
    """Where :func:`build_fixture_bundle` wrote the three files (named apart from the
    collector's :class:`~kiln_verify.openenv.collect.bundle.Bundle`, which holds bytes)."""

    directory: Path
    dataset: Path
    replay: Path
    summary: Path


def _obs(seed: int, step: int, reward: Any, done: bool, pad: str, text: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {"pulls": step, "seed": seed, "note": pad}
    if text:
        payload["input_text"] = f"Step {step}: pick an arm."
    return {"observation": payload, "reward": reward, "done": done}


def _episode(script: int, seed: int, pad: str, text: bool) -> list[tuple[dict[str, Any], Any]]:
    """(action, result json) pairs; result json is a replay ``result`` object."""

    def observation(step: int, reward: Any, done: bool = False) -> dict[str, Any]:
        return {"kind": "observation", "observation": _obs(seed, step, reward, done, pad, text)}

    def error(code: str, continued: bool) -> dict[str, Any]:
        return {
            "kind": "protocol_error",
            "error": {"code": code, "message": f"scripted {code.lower()}"},
            "continued": continued,
        }

    if script == 0:
        return [({"arm": 0}, observation(1, 0.5)), ({"arm": 1}, observation(2, 1, True))]
    if script == 1:
        rewards: list[Any] = [None, False, True]
        return [({"arm": s}, observation(s + 1, rewards[s])) for s in range(MAX_STEPS)]
    if script == 2:
        return [
            ({"arm": 9}, error("EXECUTION_ERROR", True)),
            ({"arm": 0}, error("SESSION_ERROR", False)),
        ]
    if script == 3:
        return [({"arm": 2}, observation(1, 0.25))]
    return [
        ({"arm": 7}, error("VALIDATION_ERROR", True)),
        ({"arm": 8}, error("INVALID_JSON", False)),
    ]


def build_fixture_bundle(
    directory: Path,
    *,
    groups: int = 5,
    group_size: int = 2,
    pad: int = 0,
    reasoning: int = 0,
    script_offset: int = 0,
    label: str = "",
    thinking: bool = True,
    tail_replies: tuple[tuple[str, str | None], ...] = SCHEMA_TAIL,
) -> FixtureBundle:
    """Write a consistent bundle of ``groups * group_size`` scripted episodes.

    ``script_offset`` shifts every candidate's script (a paired bundle with other returns);
    ``label`` is appended to each environment's name and description and replaces the
    observation padding: the places peer text reaches a report (hostile-input tests put
    markup there). ``tail_replies``: the (content, reasoning) model replies that end script
    3 as an invalid action, group ``g`` taking entry ``g mod len``; their segments come from
    the collector's own rule (``judge_model_reply`` with the recorded action schema), so a
    harness message is never free text.
    """
    directory.mkdir(parents=True, exist_ok=True)
    filler = label or "x" * pad
    thought = "r" + "y" * reasoning
    inspections = [_inspection(i, label) for i in range(len(TEMPLATES))]
    insp_records = [EnvironmentInspection.from_json(i) for i in inspections]
    rules = [TailRules(i["schema"]["action"]) for i in inspections]
    seed_start = 100
    replay_groups: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    hasher = serialize.DatasetHasher()
    with (directory / DATASET).open("wb") as out:
        for g in range(groups):
            env = g % len(TEMPLATES)
            seed = seed_start + g
            payload = serialize.effective_reset_payload(TEMPLATES[env], seed)
            reset_obs = _obs(seed, 0, None, False, filler, env == 0)
            reset_record = ObservationRecord.from_json(reset_obs)
            messages = [m.to_json() for m in initial_messages(insp_records[env], reset_record)]
            identity = inspections[env]["identity"]
            completions: list[dict[str, Any]] = []
            candidates: list[dict[str, Any]] = []
            for c in range(group_size):
                script = (g + c + script_offset) % 5
                pairs = _episode(script, seed, filler, env == 0)
                segments: list[TurnSegment] = []
                exchanges: list[dict[str, Any]] = []
                total = 0.0
                recoverable = 0
                for step, (action, result) in enumerate(pairs):
                    text = action_content(
                        dumps_compact(action).decode(), thinking=thinking, reasoning=thought
                    )
                    segments.append(TurnSegment.action(text))
                    if result["kind"] == "observation":
                        obs = ObservationRecord.from_json(result["observation"])
                        total += obs.reward.training_value
                        segments.append(observation_segment("step result", obs))
                    else:
                        err = ProtocolErrorRecord.from_json(result["error"])
                        recoverable += int(err.recoverable)
                        total += PENALTY
                        segments.append(protocol_error_segment(err, result["continued"]))
                    exchanges.append({"step_index": step, "action": action, "result": result})
                termination = [
                    "done",
                    "max_steps",
                    "protocol_error",
                    "invalid_model_action",
                    "protocol_error",
                ][script]
                if script == 3:
                    content, thinking_text = tail_replies[g % len(tail_replies)]
                    reply = judge_model_reply(
                        content, thinking_text, thinking=thinking, rules=rules[env]
                    )
                    assert reply.code is not None
                    assert reply.message is not None
                    segments.append(TurnSegment.action(reply.text))
                    segments.append(harness_error_segment(reply.code, reply.message))
                    total += PENALTY
                code = pairs[-1][1]["error"]["code"] if termination == "protocol_error" else None
                candidate: dict[str, Any] = {"candidate_index": c, "exchanges": exchanges}
                if script != 2:
                    candidate["final_state"] = {"pulls": len(exchanges), "seed": seed}
                latency = 1.5 + c / 8
                candidate.update(
                    episode_return=total,
                    terminal_done=termination == "done",
                    termination=termination,
                    recoverable_protocol_errors=recoverable,
                    capacity_retries=c % 2,
                    model_tokens=10 * len(segments),
                    model_latency_ms=latency,
                )
                candidates.append(candidate)
                provenance: dict[str, Any] = {
                    "schema": "kiln.openenv-rollout.v1",
                    "environment_name": identity["metadata"]["name"],
                    "environment_base_url": identity["base_url"],
                    "openapi_version": identity["openapi_version"],
                    "discovery_sha256": identity["discovery_sha256"],
                    "environment_schema_sha256": identity["schema_sha256"],
                    "action_schema_sha256": str(
                        serialize.action_schema_sha256(inspections[env]["schema"]["action"])
                    ),
                    "behavior_policy": dict(BEHAVIOR),
                    "reset_sha256": str(serialize.reset_sha256(payload)),
                    "seed": seed,
                    "steps": len(exchanges),
                    "episode_return": total,
                    "terminal_done": termination == "done",
                    "termination": termination,
                    "protocol_error_code": code,
                }
                if provenance["openapi_version"] is None:
                    del provenance["openapi_version"]
                if code is None:
                    del provenance["protocol_error_code"]
                completions.append(
                    {
                        "text": TURN_BREAK.join(s.content for s in segments if s.kind == "action"),
                        "reward": total,
                        "trajectory": [s.to_json() for s in segments],
                        "openenv": provenance,
                    }
                )
                record: dict[str, Any] = {
                    "group_index": g,
                    "candidate_index": c,
                    "environment_name": identity["metadata"]["name"],
                    "environment_url": identity["base_url"],
                    "seed": seed,
                    "steps": len(exchanges),
                    "episode_return": total,
                    "terminal_done": termination == "done",
                    "termination": termination,
                    "recoverable_protocol_errors": recoverable,
                    "capacity_retries": c % 2,
                    "model_tokens": 10 * len(segments),
                    "model_latency_ms": latency,
                }
                if code is not None:
                    record["protocol_error_code"] = code
                records.append(record)
            line = AgenticGroup.from_json({"messages": messages, "completions": completions})
            out.write(hasher.add(line))
            replay_groups.append(
                {
                    "group_index": g,
                    "environment_index": env,
                    "seed": seed,
                    "reset_payload": payload,
                    "reset_observation": reset_obs,
                    "candidates": candidates,
                }
            )
    replay = ReplayManifest.from_json(
        {
            "schema": "kiln.openenv-replay.v1",
            "client_profile": "openenv-http/1.x",
            "dataset_sha256": str(hasher.sha256),
            "protocol_error_reward": PENALTY,
            "max_steps": MAX_STEPS,
            "environments": inspections,
            "groups": replay_groups,
        }
    )
    del replay_groups
    replay_data = serialize.replay_bytes(replay)
    (directory / REPLAY).write_bytes(replay_data)
    del replay
    from kiln_verify.core.digest import sha256_bytes
    from kiln_verify.openenv.records.summary import RolloutRecord

    stats = compute_stats([RolloutRecord.from_json(r) for r in records])
    summary = RolloutSummary.from_json(
        {
            "schema": "kiln.openenv-rollout-summary.v5",
            "kiln_url": "http://127.0.0.1:8420",
            "adapter": None,
            "adapter_label": "base",
            "behavior_policy": dict(BEHAVIOR),
            "environments": inspections,
            "groups": groups,
            "group_size": group_size,
            "rollout_count": groups * group_size,
            "seed_start": seed_start,
            "max_steps": MAX_STEPS,
            "concurrency": 1,
            "max_action_tokens": 256,
            "temperature": 1.0,
            "thinking": thinking,
            "protocol_error_reward": PENALTY,
            "max_recoverable_errors": MAX_RECOVERABLE,
            "capacity_wait_seconds": 300,
            "reset_plan_sha256": str(serialize.reset_plan_sha256(TEMPLATES)),
            "output_path": DATASET,
            "replay_output_path": REPLAY,
            "summary_output_path": SUMMARY,
            "dataset_sha256": str(hasher.sha256),
            "dataset_bytes": hasher.size,
            "replay_sha256": str(sha256_bytes(replay_data)),
            "replay_bytes": len(replay_data),
            "stats": stats.to_json(),
            "rollouts": records,
        }
    )
    (directory / SUMMARY).write_bytes(serialize.summary_bytes(summary))
    return FixtureBundle(directory, directory / DATASET, directory / REPLAY, directory / SUMMARY)
