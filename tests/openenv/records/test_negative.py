"""Readers fail closed with exact error codes, JSON paths and line numbers."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.openenv.records import serialize
from kiln_verify.openenv.records.replay import read_replay
from kiln_verify.openenv.records.rollout import iter_rollout_lines
from kiln_verify.openenv.records.summary import (
    RolloutSummary,
    read_summary,
    relabel_as_v2,
)
from kiln_verify.records import TurnSegment
from tests.openenv.records import fixtures


def _code(call: Callable[[], object]) -> KilnError:
    with pytest.raises(KilnError) as info:
        call()
    return info.value


def _summary(mutate: Callable[[dict[str, Any]], None]) -> KilnError:
    value = fixtures.summary_json()
    mutate(value)
    return _code(lambda: read_summary(json.dumps(value).encode(), "s.json"))


def _replay(mutate: Callable[[dict[str, Any]], None]) -> KilnError:
    value = fixtures.replay_json()
    mutate(value)
    return _code(lambda: read_replay(json.dumps(value).encode(), "r.json"))


def _line(mutate: Callable[[dict[str, Any]], None]) -> KilnError:
    good = fixtures.dataset_file()
    value = fixtures.group_json()
    mutate(value)
    data = good + json.dumps(value, separators=(",", ":")).encode() + b"\n"
    return _code(lambda: list(iter_rollout_lines(io.BytesIO(data), "c.jsonl")))


def _set(path: str, item: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(value: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = value
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if item is _DELETE:
            del target[int(last) if last.isdigit() else last]
        else:
            target[int(last) if last.isdigit() else last] = item

    return mutate


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "item", "code", "where"),
    [
        ("surprise", 1, "record_invalid", "$.surprise"),
        ("stats.extra", 1, "record_invalid", "$.stats.extra"),
        ("schema", "kiln.openenv-rollout-summary.v1", "summary_version_unsupported", None),
        ("schema", "kiln.openenv-rollout-summary.v6", "summary_version_unsupported", None),
        ("temperature", 1, "record_invalid", "$.temperature"),
        ("protocol_error_reward", -1, "record_invalid", "$.protocol_error_reward"),
        ("groups", 1.0, "record_invalid", "$.groups"),
        ("groups", True, "record_invalid", "$.groups"),
        ("groups", "1", "record_invalid", "$.groups"),
        ("groups", 0, "record_invalid", "$.groups"),
        ("max_steps", 257, "record_invalid", "$.max_steps"),
        ("seed_start", 2**63, "record_invalid", "$.seed_start"),
        ("dataset_sha256", "sha256:" + "A" * 64, "record_invalid", "$.dataset_sha256"),
        ("kiln_url", _DELETE, "record_invalid", "$.kiln_url"),
        ("rollouts.0.model_latency_ms", -1.0, "record_invalid", "$.rollouts[0].model_latency_ms"),
        ("rollouts.0.terminal_done", True, "record_invalid", "$.rollouts[0]"),
        ("rollouts.0.protocol_error_code", "X", "record_invalid", "$.rollouts[0]"),
        ("environments.0.identity.schema_sha256", "x", "record_invalid",
         "$.environments[0].identity.schema_sha256"),
        ("environments.0.identity.discovery_sha256", None, "record_invalid",
         "$.environments[0].identity"),
        ("thinking_budget_tokens", 256, "record_invalid", "$"),
        ("thinking_budget_tokens", None, "record_invalid", "$"),
        ("behavior_policy", _DELETE, "summary_version_conflict", None),
        ("reset_plan_sha256", _DELETE, "summary_version_conflict", None),
        ("reset_options_sha256", fixtures.D, "summary_version_conflict", None),
        ("training_submission", {"job_id": "j"}, "summary_version_conflict", None),
        ("adapter", "lora", "summary_version_conflict", None),
    ],
)  # fmt: skip
def test_summary_errors(path: str, item: Any, code: str, where: str | None) -> None:
    error = _summary(_set(path, item))
    assert error.code == code
    assert error.path == "s.json"
    if where is not None:
        assert f" at {where}:" in error.rule, error.rule


def test_summary_error_never_echoes_the_value() -> None:
    secret = "TOPSECRET-" + "x" * 50
    error = _summary(_set("groups", secret))
    assert "TOPSECRET" not in str(error)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b'{"schema":"kiln.openenv-rollout-summary.v5","schema":"x"}', "json_duplicate_key"),
        (b'{"schema":"kiln.openenv-rollout-summary.v5","temperature":NaN}', "json_non_finite"),
        (b'{"schema":"kiln.openenv-rollout-summary.v5","temperature":1e400}', "json_non_finite"),
        (b"[1]", "json_not_object"),
        (b"{", "json_syntax"),
        (b'{"groups":1}', "summary_version_unsupported"),
    ],
)
def test_summary_strict_json(data: bytes, code: str) -> None:
    error = _code(lambda: read_summary(data, "s.json"))
    assert (error.code, error.path) == (code, "s.json")


def test_v2_and_v3_and_v4_receipts_are_read() -> None:
    summary = read_summary(fixtures.summary_file())
    v2 = relabel_as_v2(summary, fixtures.D)
    assert v2.version == 2
    assert v2.reset_plan_sha256 is None
    data = json.dumps(v2.to_json()).encode()
    assert read_summary(data).reset_options_sha256 == fixtures.D
    for version in (3, 4):
        value = fixtures.summary_json()
        value["schema"] = f"kiln.openenv-rollout-summary.v{version}"
        del value["behavior_policy"]
        assert read_summary(json.dumps(value).encode()).version == version


@pytest.mark.parametrize("version", [2, 3, 4])
def test_legacy_version_rules(version: int) -> None:
    value = fixtures.summary_json()
    value["schema"] = f"kiln.openenv-rollout-summary.v{version}"
    # behaviour policy is v5-only
    assert _code(lambda: read_summary(json.dumps(value).encode())).code == (
        "summary_version_conflict"
    )
    del value["behavior_policy"]
    value["training_contract"] = {
        "schema": "kiln.openenv-training-contract.v1",
        "effective_config": {
            "behavior_policy": "no_importance_correction",
            "base_adapter": None,
            "output_name": "o",
        },
    }
    if version == 2:
        value["reset_options_sha256"] = value.pop("reset_plan_sha256")
    if version == 4:
        assert read_summary(json.dumps(value).encode()).training_contract is not None
    else:
        error = _code(lambda: read_summary(json.dumps(value).encode()))
        assert error.code == "summary_version_conflict"


@pytest.mark.parametrize(
    ("config", "ok"),
    [
        ({"behavior_policy": "no_importance_correction", "base_adapter": None, "output_name": "o"},
         True),
        ({"behavior_policy": "recorded", "base_adapter": None, "output_name": "o"}, False),
        ({"behavior_policy": "no_importance_correction", "base_adapter": "x", "output_name": "o"},
         False),
        ({"behavior_policy": "no_importance_correction", "base_adapter": None, "output_name": ""},
         False),
    ],
)  # fmt: skip
def test_training_contract_rules(config: dict[str, Any], ok: bool) -> None:
    value = fixtures.summary_json()
    value["training_contract"] = {"schema": "kiln.openenv-training-contract.v1",
                                  "effective_config": config}  # fmt: skip
    if ok:
        read_summary(json.dumps(value).encode())
    else:
        error = _code(lambda: read_summary(json.dumps(value).encode()))
        assert error.code == "summary_version_conflict"


def test_writer_only_writes_v5() -> None:
    summary = read_summary(fixtures.summary_file())
    v2 = relabel_as_v2(summary, fixtures.D)
    assert _code(lambda: serialize.summary_bytes(v2)).code == "summary_version_unsupported"
    broken = RolloutSummary.model_construct(**{**dict(summary), "behavior_policy": None})
    assert _code(lambda: serialize.summary_bytes(broken)).code == "summary_version_conflict"


@pytest.mark.parametrize(
    ("path", "item", "code", "where"),
    [
        ("schema", "kiln.openenv-replay.v2", "record_schema_unsupported", None),
        ("client_profile", "openenv-http/2.x", "record_invalid", "$.client_profile"),
        ("extra", 1, "record_invalid", "$.extra"),
        ("max_steps", 0, "record_invalid", "$.max_steps"),
        ("groups", [], "record_invalid", "$.groups"),
        ("groups.0.candidates.0.episode_return", 0, "record_invalid",
         "$.groups[0].candidates[0].episode_return"),
        ("groups.0.candidates.0.exchanges.1.result.observation.reward", "1", "record_invalid",
         "$.groups[0].candidates[0].exchanges[1].result.observation.reward"),
        ("groups.0.candidates.0.exchanges.1.result.observation.done", 1, "record_invalid",
         "$.groups[0].candidates[0].exchanges[1].result.observation.done"),
        ("groups.0.candidates.0.exchanges.0.result.kind", "other", "record_invalid",
         "$.groups[0].candidates[0].exchanges[0].result"),
        ("groups.0.candidates.0.exchanges.0.result.error.code", "NOPE", "record_invalid",
         "$.groups[0].candidates[0].exchanges[0].result.error.code"),
        ("groups.0.candidates.0.exchanges.0.result.error.code", "SESSION_ERROR", "record_invalid",
         "$.groups[0].candidates[0].exchanges[0].result"),
        ("groups.0.candidates.0.exchanges.0.action", [1], "record_invalid",
         "$.groups[0].candidates[0].exchanges[0].action"),
        ("groups.0.reset_observation.metadata", None, "record_invalid",
         "$.groups[0].reset_observation"),
        ("groups.0.candidates.0.termination", "done", "record_invalid",
         "$.groups[0].candidates[0]"),
    ],
)  # fmt: skip
def test_replay_errors(path: str, item: Any, code: str, where: str | None) -> None:
    error = _replay(_set(path, item))
    assert error.code == code
    assert error.path == "r.json"
    if where is not None:
        assert f" at {where}:" in error.rule, error.rule


def test_replay_duplicate_key_and_nan() -> None:
    data = fixtures.replay_file()
    dup = data.replace(b'"max_steps": 2,', b'"max_steps": 2,\n  "max_steps": 2,')
    assert _code(lambda: read_replay(dup, "r.json")).code == "json_duplicate_key"
    nan = data.replace(b'"model_latency_ms": 3.2', b'"model_latency_ms": NaN')
    assert _code(lambda: read_replay(nan, "r.json")).code == "json_non_finite"


@pytest.mark.parametrize(
    ("path", "item", "code"),
    [
        ("surprise", 1, "record_invalid"),
        ("completions.0.reward", 0, "record_invalid"),
        ("completions.0.reward", -0.0, "record_invalid"),
        ("completions.0.provenance", {}, "record_invalid"),
        ("completions.0.openenv", _DELETE, "record_invalid"),
        ("completions.0.openenv.schema", "kiln.openenv-rollout.v2", "record_schema_unsupported"),
        ("completions.0.openenv.terminal_done", True, "record_invalid"),
        ("completions.0.openenv.environment_name", " x", "record_invalid"),
        ("completions.0.openenv.environment_name", "a\u0007b", "record_invalid"),
        ("completions.0.openenv.environment_name", "n" * 257, "record_invalid"),
        ("completions.0.openenv.openapi_version", None, "record_invalid"),
        ("completions.0.openenv.seed", -1, "record_invalid"),
        ("completions.0.trajectory", [], "record_invalid"),
        ("completions.0.trajectory.0.kind", "thought", "record_invalid"),
        ("messages", [], "record_invalid"),
    ],
)
def test_rollout_line_errors_carry_line_numbers(path: str, item: Any, code: str) -> None:
    error = _line(_set(path, item))
    assert (error.code, error.path, error.line) == (code, "c.jsonl", 2)


def test_rollout_line_json_errors() -> None:
    good = fixtures.dataset_file()
    cases = {
        good + b"\n": "jsonl_blank_line",
        good + good[:-1]: "jsonl_missing_newline",
        good + b'{"messages":[],"messages":[]}\n': "json_duplicate_key",
        good + b'{"x":NaN}\n': "json_non_finite",
    }
    for data, code in cases.items():
        with pytest.raises(KilnError) as info:
            list(iter_rollout_lines(io.BytesIO(data), "c.jsonl"))
        error = info.value
        assert (error.code, error.line) == (code, 2), data[-40:]


def test_rollout_line_cap() -> None:
    data = fixtures.dataset_file()
    error = _code(lambda: list(iter_rollout_lines(io.BytesIO(data), "c.jsonl", max_line_bytes=100)))
    assert (error.code, error.line) == ("limit_exceeded", 1)


def test_kind_defaults_to_context_and_is_always_written() -> None:
    segment = TurnSegment.from_json({"role": "user", "content": "c"})
    assert segment.kind == "context"
    assert segment.to_json() == {"role": "user", "content": "c", "kind": "context"}


@pytest.mark.parametrize("key", ["schema", "client_profile"])
def test_nested_constant_tags_are_required(key: str) -> None:
    # The models give these tags defaults for Python callers; a document must spell them.
    error = _replay(_set(f"environments.0.identity.{key}", _DELETE))
    assert error.code == "record_invalid"
    assert f"'{key}' is required" in str(error)
