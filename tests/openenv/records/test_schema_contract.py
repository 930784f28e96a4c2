"""The checked-in JSON Schema is generated from the models and validates our fixtures."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from kiln_verify.core.jsonio import loads
from kiln_verify.openenv.records.schema_export import SCHEMA_PATH, build_schema, main, schema_bytes
from tests.openenv.records import fixtures


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    schema = dict(build_schema())
    schema["$ref"] = f"#/$defs/{definition}"
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_checked_in_schema_matches_models() -> None:
    assert SCHEMA_PATH.read_bytes() == schema_bytes(), (
        "contracts/kiln-openenv-v1.schema.json drifted; run "
        "python -m kiln_verify.openenv.records.schema_export"
    )
    assert main(["--check"]) == 0


def test_schema_document_shape() -> None:
    schema = build_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$ref"] == "#/$defs/RolloutSummary"
    for name in (
        "RolloutSummary",
        "ReplayManifest",
        "AgenticGroup",
        "OpenEnvRolloutProvenance",
        "VerificationReport",
        "ReplayRunReport",
        "EnvironmentEvaluationReceipt",
        "BehaviorPolicyIdentity",
    ):
        assert schema["$defs"][name]["additionalProperties"] is False
    assert list(schema["$defs"]) == sorted(schema["$defs"])
    # Generation is deterministic and the file ends with exactly one LF.
    assert schema_bytes() == schema_bytes()
    assert schema_bytes().endswith(b"}\n")


@pytest.mark.parametrize(
    ("definition", "document"),
    [
        ("RolloutSummary", lambda: loads(fixtures.summary_file(), max_bytes=1 << 24)),
        ("ReplayManifest", lambda: loads(fixtures.replay_file(), max_bytes=1 << 24)),
        ("AgenticGroup", lambda: loads(fixtures.dataset_file()[:-1], max_bytes=1 << 24)),
    ],
)
def test_fixtures_validate_against_schema(definition: str, document: Any) -> None:
    _validator(definition).validate(document())


def test_schema_rejects_extra_keys_and_null_for_omitted_fields() -> None:
    validator = _validator("RolloutSummary")
    summary = json.loads(fixtures.summary_file())
    assert validator.is_valid(summary)
    assert not validator.is_valid({**summary, "surprise": 1})
    assert not validator.is_valid({**summary, "thinking_budget_tokens": None})
    replay = _validator("ReplayManifest")
    document = json.loads(fixtures.replay_file())
    document["groups"][0]["candidates"][0]["exchanges"][0]["result"]["kind"] = "other"
    assert not replay.is_valid(document)


def test_schema_states_the_termination_and_submission_conditionals() -> None:
    validator = _validator("RolloutSummary")
    summary = json.loads(fixtures.summary_file())
    bad = copy.deepcopy(summary)
    bad["rollouts"][0]["terminal_done"] = True
    assert not validator.is_valid(bad)
    bad = copy.deepcopy(summary)
    bad["rollouts"][0]["protocol_error_code"] = "SESSION_ERROR"
    assert not validator.is_valid(bad)
    bad = copy.deepcopy(summary)
    bad["training_submission"] = {"job_id": "j"}
    assert not validator.is_valid(bad)
    group = _validator("AgenticGroup")
    line = json.loads(fixtures.dataset_file())
    assert group.is_valid(line)
    line["completions"][0]["openenv"]["termination"] = "done"
    assert not group.is_valid(line)
