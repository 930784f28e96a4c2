"""The checked-in HF/TRL JSON Schema is generated from the models and validates fixtures."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from kiln_verify.hf.schema_export import SCHEMA_PATH, build_schema, main, schema_bytes
from tests.hf import fixtures


def _validator(definition: str | None = None) -> jsonschema.Draft202012Validator:
    schema = dict(build_schema())
    if definition is not None:
        del schema["oneOf"]
        schema["$ref"] = f"#/$defs/{definition}"
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_checked_in_schema_matches_models() -> None:
    assert SCHEMA_PATH.read_bytes() == schema_bytes(), (
        "contracts/kiln-hf-trl-v1.schema.json drifted; run python -m kiln_verify.hf.schema_export"
    )
    assert main(["--check"]) == 0


def test_schema_bytes_are_deterministic() -> None:
    assert schema_bytes() == schema_bytes()
    assert schema_bytes().endswith(b"}\n")


def test_check_mode_reports_drift(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kiln_verify.hf import schema_export

    stale = tmp_path / "schema.json"
    stale.write_bytes(b"{}\n")
    monkeypatch.setattr(schema_export, "SCHEMA_PATH", stale)
    assert main(["--check"]) == 1
    assert main([]) == 0
    assert stale.read_bytes() == schema_bytes()
    assert main(["--check"]) == 0
    assert main(["--bogus"]) == 2


def test_schema_document_shape() -> None:
    schema = build_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    roots = [branch["$ref"] for branch in schema["oneOf"]]
    assert roots == [
        "#/$defs/ExportManifest",
        "#/$defs/TrainingResult",
        "#/$defs/ImportReceipt",
        "#/$defs/SftIngestionReceipt",
        "#/$defs/GrpoGroup",
    ]
    defs = schema["$defs"]
    for name in (
        "BaseWeightShardManifest",
        "ExecutionProvenance",
        "FileIdentity",
        "RolloutProvenance",
        "GrpoCompletion",
        "DecimalValue",
        "TextListValue",
    ):
        assert defs[name]["additionalProperties"] is False
    # Omitted-not-null: optional fields are not required and do not admit null.
    export = defs["ExportManifest"]
    assert "input_adapter" not in export["required"]
    assert export["properties"]["input_adapter"] == {"$ref": "#/$defs/InputAdapter"}
    assert "model_config" in defs["ExportModel"]["properties"]


@pytest.mark.parametrize(
    "build",
    [
        fixtures.sft_export,
        lambda: fixtures.sft_export(optional=True),
        fixtures.grpo_export,
        fixtures.result,
        fixtures.import_receipt,
        fixtures.ingestion,
        fixtures.grpo_group,
    ],
)
def test_fixtures_validate_against_the_schema(build: Any) -> None:
    validator = _validator()
    errors = list(validator.iter_errors(build().to_json()))
    assert errors == []


def test_schema_rejects_extra_fields_and_nulls() -> None:
    validator = _validator("ExportManifest")
    document = fixtures.sft_export().to_json()
    extra = copy.deepcopy(document)
    extra["extra"] = 1
    assert not validator.is_valid(extra)
    null = copy.deepcopy(document)
    null["input_adapter"] = None
    assert not validator.is_valid(null)
    bad_digest = copy.deepcopy(document)
    bad_digest["export_sha256"] = "sha256:" + "A" * 64
    assert not validator.is_valid(bad_digest)
