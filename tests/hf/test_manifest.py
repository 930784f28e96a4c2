"""HF/TRL records: byte-exact round trips, construction helpers and exact error codes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kiln_verify.core.digest import ArtifactIdentity, Sha256Digest
from kiln_verify.core.jsonio import dumps_compact, dumps_pretty, loads
from kiln_verify.errors import KilnError
from kiln_verify.hf.manifest import (
    ExecutionProvenance,
    FileIdentity,
    GrpoGroup,
    ModelProvenance,
    ResidentModelIdentity,
    TokenizerIdentity,
    TrainingResult,
    document_bytes,
    grpo_row_bytes,
    parse_grpo_group,
    read_export,
    read_import,
    read_result,
    read_sft_ingestion,
    rollout_provenance,
)
from kiln_verify.records import BehaviorPolicyIdentity, SamplingParameters, TokenProvenance
from tests.hf import fixtures

Reader = Callable[..., Any]

DOCUMENTS: dict[str, tuple[Callable[[], Any], Reader]] = {
    "sft_export": (fixtures.sft_export, read_export),
    "sft_export_optional": (lambda: fixtures.sft_export(optional=True), read_export),
    "grpo_export": (fixtures.grpo_export, read_export),
    "result": (fixtures.result, read_result),
    "grpo_result": (lambda: fixtures.result(fixtures.grpo_export()), read_result),
    "import": (fixtures.import_receipt, read_import),
    "sft_ingestion": (fixtures.ingestion, read_sft_ingestion),
}


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_document_round_trip_is_byte_exact(name: str) -> None:
    build, read = DOCUMENTS[name]
    record = build()
    data = document_bytes(record)
    again = read(data)
    assert again == record
    assert document_bytes(again) == data
    assert data.endswith(b"}\n")
    assert b"null" not in data  # absent optional fields are omitted, never null


def test_field_order_is_the_reference_order() -> None:
    export = fixtures.sft_export(optional=True).to_json()
    assert list(export) == [
        "schema_version",
        "manifest_type",
        "task",
        "source_execution_provenance",
        "model",
        "data",
        "reference_script",
        "environment_lock",
        "input_adapter",
        "export_sha256",
    ]
    assert list(export["model"]) == [
        "served_model_id",
        "base_weight_shard_manifest",
        "tokenizer_vocab_sha256",
        "model_config",
        "tokenizer",
        "chat_template",
        "native_training_chat_template",
        "trl_training_chat_template",
    ]
    assert list(export["data"]) == [
        "source_name",
        "format",
        "row_count",
        "ordered_corpus_sha256",
        "dataset",
        "sft_selection",
        "split_manifest",
    ]
    provenance = export["source_execution_provenance"]
    assert list(provenance) == [
        "schema_version",
        "provenance_type",
        "backend",
        "build",
        "model",
        "precision",
        "kernels",
        "configuration",
        "provenance_sha256",
    ]
    assert list(fixtures.result().to_json()) == [
        "schema_version",
        "result_type",
        "export_sha256",
        "task",
        "trainer",
        "effective_config",
        "output_adapter",
        "result_sha256",
    ]
    assert list(fixtures.import_receipt().to_json()) == [
        "schema_version",
        "import_type",
        "adapter_name",
        "task",
        "export_sha256",
        "result_sha256",
        "resident_model",
        "used_exported_reference_script",
        "import_sha256",
    ]
    assert next(iter(fixtures.ingestion().to_json())) == "schema"


def test_grpo_row_round_trip_is_byte_exact() -> None:
    group = fixtures.grpo_group()
    row = grpo_row_bytes(group)
    assert row.endswith(b"\n")
    assert row.count(b"\n") == 1
    again = parse_grpo_group(loads(row[:-1], max_bytes=1 << 20))
    assert again == group
    assert grpo_row_bytes(again) == row
    assert dumps_compact(fixtures.grpo_group_json()) + b"\n" == row
    text = row.decode()
    assert '"completions":[{"text":"b","reward":1.0,"provenance":{' in text  # no empty trajectory
    assert '"behavior_logprob":null' in text  # forced tokens keep an explicit null
    assert '"temperature":0.7,' in text


def test_grpo_rollouts_alias_reads_but_writes_completions() -> None:
    value = fixtures.grpo_group_json()
    value["rollouts"] = value.pop("completions")
    group = parse_grpo_group(value)
    assert b'"completions"' in grpo_row_bytes(group)


def test_file_identity_matches_core_artifact_identity() -> None:
    identity = ArtifactIdentity("train.py", 5, Sha256Digest("a" * 64))
    record = FileIdentity.from_artifact(identity)
    assert record.to_json() == identity.to_dict()
    assert record.to_artifact() == identity


def test_resident_identity_from_export() -> None:
    export = fixtures.sft_export()
    resident = ResidentModelIdentity.from_export(export.model)
    assert resident.model_config_sha256 == export.model.config_file.sha256
    assert (
        resident.trl_training_chat_template_sha256 == export.model.trl_training_chat_template.sha256
    )
    receipt = fixtures.import_receipt(export)
    assert receipt.matches_export(export)
    assert not receipt.matches_export(fixtures.grpo_export())


def test_uses_reference_script() -> None:
    export = fixtures.sft_export()
    assert not fixtures.result(export).uses_reference_script(export)
    same = fixtures.result(export).to_json()
    same["trainer"]["script"]["sha256"] = export.reference_script.sha256
    del same["result_sha256"]
    assert TrainingResult.create(**same).uses_reference_script(export)


def test_execution_provenance_for_this_process() -> None:
    model = ModelProvenance(
        model_config_sha256=fixtures.digest("c"),
        tokenizer_vocab_sha256=fixtures.digest("v"),
        tokenizer_config_sha256=fixtures.digest("t"),
        chat_template_sha256=fixtures.digest("ct"),
        training_chat_template_sha256=fixtures.digest("tt"),
    )
    record = ExecutionProvenance.for_this_process(model, inference_dtype="float32")
    assert record.build.package_version
    assert record.kernels.versions["kiln-verify"] == record.build.package_version
    again = ExecutionProvenance.model_validate(
        loads(dumps_pretty(record.to_json()), max_bytes=1 << 20)
    )
    assert again == record


def test_rollout_provenance_from_policy_token_provenance() -> None:
    token = TokenProvenance(
        prompt_token_ids=(10,),
        completion_token_ids=(22, 21),
        behavior_logprobs=(-0.25, None),
        sources=("sampled", "forced"),
        seed=7,
        sampling=SamplingParameters(temperature=0.7, max_tokens=2, top_p=0.95, top_k=20),
        template_kwargs={"enable_thinking": True},
        generation_backend="cpu",
    )
    expected = fixtures.grpo_group().completions[0].provenance
    built = rollout_provenance(
        token,
        messages=fixtures.MESSAGES,
        text="b",
        behavior_policy=BehaviorPolicyIdentity.model_validate(fixtures.POLICY),
        tokenizer=TokenizerIdentity.model_validate(expected.tokenizer.to_json()),
        tools=[{"type": "function", "function": {"name": "f"}}],
        thinking_budget=expected.sampling.thinking_budget,
    )
    assert built == expected


# --- negative cases ------------------------------------------------------------------------


def _mutated(name: str, change: Callable[[dict[str, Any]], None]) -> bytes:
    build, _ = DOCUMENTS[name]
    value = copy.deepcopy(build().to_json())
    change(value)
    return dumps_pretty(value)


def _set(path: str, new: Any) -> Callable[[dict[str, Any]], None]:
    def change(value: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = value
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[last] = new

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(value: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = value
        for part in parents:
            target = target[part]
        del target[last]

    return change


BAD = "sha256:" + "A" * 64
NEGATIVE: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    # unknown, missing and null fields
    ("sft_export", "extra root field", _set("extra", 1), "record_invalid"),
    ("sft_export", "extra nested field", _set("model.extra", 1), "record_invalid"),
    ("sft_export", "missing task", _drop("task"), "record_invalid"),
    ("sft_export", "missing manifest_type", _drop("manifest_type"), "record_invalid"),
    ("sft_export", "null input_adapter", _set("input_adapter", None), "record_invalid"),
    ("sft_export", "null split_manifest", _set("data.split_manifest", None), "record_invalid"),
    ("result", "extra field", _set("trainer.extra", "x"), "record_invalid"),
    ("import", "missing resident_model", _drop("resident_model"), "record_invalid"),
    ("sft_ingestion", "extra field", _set("extra", 1), "record_invalid"),
    # versions
    (
        "sft_export",
        "export v2",
        _set("manifest_type", "kiln.hf-trl-export.v2"),
        "record_schema_unsupported",
    ),
    ("sft_export", "schema_version 2", _set("schema_version", 2), "record_schema_unsupported"),
    (
        "sft_export",
        "schema_version true",
        _set("schema_version", True),
        "record_schema_unsupported",
    ),
    (
        "result",
        "result v2",
        _set("result_type", "kiln.hf-trl-result.v2"),
        "record_schema_unsupported",
    ),
    (
        "import",
        "import v0",
        _set("import_type", "kiln.hf-trl-import.v0"),
        "record_schema_unsupported",
    ),
    (
        "sft_ingestion",
        "ingestion v2",
        _set("schema", "kiln.sft-ingestion.v2"),
        "record_schema_unsupported",
    ),
    (
        "sft_export",
        "shards v2",
        _set("model.base_weight_shard_manifest.manifest_type", "kiln.base-weight-shards.v2"),
        "record_invalid",
    ),
    (
        "sft_export",
        "provenance v2",
        _set("source_execution_provenance.provenance_type", "kiln.execution-provenance.v2"),
        "record_invalid",
    ),
    # digests
    ("sft_export", "uppercase digest", _set("model.tokenizer_vocab_sha256", BAD), "record_invalid"),
    ("sft_export", "bare hex digest", _set("reference_script.sha256", "a" * 64), "record_invalid"),
    ("sft_export", "self digest", _set("export_sha256", "sha256:" + "0" * 64), "digest_mismatch"),
    ("sft_export", "tampered field", _set("data.source_name", "other"), "digest_mismatch"),
    ("result", "self digest", _set("result_sha256", "sha256:" + "0" * 64), "digest_mismatch"),
    ("import", "self digest", _set("adapter_name", "other"), "digest_mismatch"),
    (
        "sft_export",
        "shard aggregate",
        _set("model.base_weight_shard_manifest.aggregate_sha256", "sha256:" + "0" * 64),
        "record_invalid",
    ),
    (
        "sft_export",
        "shard total",
        _set("model.base_weight_shard_manifest.total_size_bytes", 34),
        "record_invalid",
    ),
    (
        "sft_export",
        "provenance digest",
        _set("source_execution_provenance.provenance_sha256", "sha256:" + "0" * 64),
        "record_invalid",
    ),
    (
        "sft_export",
        "kernel contract digest",
        _set("source_execution_provenance.kernels.contract_sha256", "sha256:" + "0" * 64),
        "record_invalid",
    ),
    (
        "sft_ingestion",
        "kept corpus digest",
        _set("kept_corpus_sha256", "sha256:" + "0" * 64),
        "record_invalid",
    ),
    # paths and sizes
    (
        "sft_export",
        "traversal",
        _set("reference_script.relative_path", "../train.py"),
        "record_invalid",
    ),
    (
        "sft_export",
        "absolute",
        _set("reference_script.relative_path", "/train.py"),
        "record_invalid",
    ),
    (
        "sft_export",
        "backslash",
        _set("reference_script.relative_path", "a\\train.py"),
        "record_invalid",
    ),
    (
        "sft_export",
        "dot component",
        _set("reference_script.relative_path", "./train.py"),
        "record_invalid",
    ),
    (
        "sft_export",
        "wrong fixed path",
        _set("reference_script.relative_path", "run.py"),
        "record_invalid",
    ),
    ("sft_export", "zero size", _set("environment_lock.size_bytes", 0), "record_invalid"),
    ("sft_export", "string size", _set("environment_lock.size_bytes", "10"), "record_invalid"),
    (
        "result",
        "wrong script path",
        _set("trainer.script.relative_path", "train.py"),
        "record_invalid",
    ),
    # cross-field rules
    ("sft_export", "task/format", _set("task", "grpo"), "record_invalid"),
    ("sft_export", "row count", _set("data.row_count", 3), "record_invalid"),
    ("sft_export", "counts", _set("data.sft_selection.rows_read", 4), "record_invalid"),
    (
        "sft_export",
        "provenance model",
        _set("source_execution_provenance.model.tokenizer_vocab_sha256", "sha256:" + "0" * 64),
        "record_invalid",
    ),
    (
        "grpo_export",
        "grpo without schema",
        _drop("data.rollout_provenance_schema"),
        "record_invalid",
    ),
    ("sft_export", "blank served model", _set("model.served_model_id", " Qwen"), "record_invalid"),
    ("sft_export", "control char", _set("data.source_name", "a\u0007b"), "record_invalid"),
    ("result", "trainer kind", _set("trainer.kind", "trl_grpo_trainer"), "record_invalid"),
    ("result", "empty config", _set("effective_config", {}), "record_invalid"),
    (
        "result",
        "nan decimal",
        _set("effective_config.learning_rate.value", "nan"),
        "record_invalid",
    ),
    (
        "result",
        "infinite decimal",
        _set("effective_config.learning_rate.value", "1e400"),
        "record_invalid",
    ),
    (
        "result",
        "float decimal",
        _set("effective_config.learning_rate.value", 2e-5),
        "record_invalid",
    ),
    ("result", "negative unsigned", _set("effective_config.seed.value", -1), "record_invalid"),
    ("result", "bool unsigned", _set("effective_config.seed.value", True), "record_invalid"),
    ("result", "i64 overflow", _set("effective_config.offset.value", 2**63), "record_invalid"),
    ("result", "unknown kind", _set("effective_config.seed.kind", "float"), "record_invalid"),
    (
        "result",
        "blank key",
        _set("effective_config", {" seed": {"kind": "unsigned", "value": 1}}),
        "record_invalid",
    ),
    ("import", "dot adapter name", _set("adapter_name", ".hidden"), "record_invalid"),
    ("import", "slash adapter name", _set("adapter_name", "a/b"), "record_invalid"),
    ("sft_ingestion", "row order", _set("rejected_rows.0.row_index", 4), "record_invalid"),
    ("sft_ingestion", "unknown reason", _set("rejected_rows.0.reason", "bad"), "record_invalid"),
    ("sft_ingestion", "blank locator", _set("source_locator", " "), "record_invalid"),
]


@pytest.mark.parametrize(
    ("name", "change", "code"),
    [
        pytest.param(name, change, code, id=f"{name}-{label}")
        for name, label, change, code in NEGATIVE
    ],
)
def test_document_rejections(
    name: str, change: Callable[[dict[str, Any]], None], code: str
) -> None:
    _, read = DOCUMENTS[name]
    with pytest.raises(KilnError) as caught:
        read(_mutated(name, change), source="doc.json")
    assert caught.value.code == code
    assert caught.value.path == "doc.json"


def test_record_invalid_names_the_json_path() -> None:
    with pytest.raises(KilnError, match=r"\$\.reference_script\.relative_path"):
        read_export(_mutated("sft_export", _set("reference_script.relative_path", "../x")))


def test_duplicate_keys_and_oversize_are_refused() -> None:
    data = document_bytes(fixtures.result())
    duplicated = data.replace(b'"task": "sft",', b'"task": "sft", "task": "sft",')
    with pytest.raises(KilnError) as caught:
        read_result(duplicated)
    assert caught.value.code == "json_duplicate_key"
    with pytest.raises(KilnError) as caught:
        read_result(b" " * (4 * 1024 * 1024) + data)
    assert caught.value.code == "limit_exceeded"
    with pytest.raises(KilnError) as caught:
        read_result(b"[]")
    assert caught.value.code == "json_not_object"


def _row(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    value = fixtures.grpo_group_json()
    change(value)
    return value


def _provenance(index: int, path: str, new: Any) -> Callable[[dict[str, Any]], None]:
    return _set(f"completions.{index}.provenance.{path}", new)


GRPO_NEGATIVE: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("one completion", lambda v: v["completions"].pop(), "record_invalid"),
    ("no messages", _set("messages", []), "record_invalid"),
    ("openenv key", _set("completions.0.openenv", {}), "record_invalid"),
    ("missing provenance", lambda v: v["completions"][0].pop("provenance"), "record_invalid"),
    ("empty trajectory", _set("completions.0.trajectory", []), "record_invalid"),
    ("integer reward", _set("completions.0.reward", 1), "record_invalid"),
    ("huge reward", _set("completions.0.reward", 1e39), "record_invalid"),
    (
        "provenance v2",
        _provenance(0, "schema", "kiln.rollout-provenance.v2"),
        "record_schema_unsupported",
    ),
    (
        "prompt digest",
        _provenance(0, "prompt_messages_sha256", "sha256:" + "0" * 64),
        "record_invalid",
    ),
    (
        "payload digest",
        _provenance(0, "scored_payload_sha256", "sha256:" + "0" * 64),
        "record_invalid",
    ),
    ("token id", _provenance(0, "action_tokens.0.token_id", 23), "record_invalid"),
    ("prompt count", _provenance(0, "prompt_token_count", 4), "record_invalid"),
    ("index in prompt", _provenance(0, "action_tokens.0.sequence_index", 0), "record_invalid"),
    ("positive logprob", _provenance(0, "action_tokens.0.behavior_logprob", 0.5), "record_invalid"),
    (
        "sampled null logprob",
        _provenance(0, "action_tokens.0.behavior_logprob", None),
        "record_invalid",
    ),
    ("forced logprob", _provenance(0, "action_tokens.1.behavior_logprob", -1.0), "record_invalid"),
    (
        "forced with another close token",
        _provenance(0, "sampling.thinking_budget", {"max_tokens": 1, "close_token_ids": [9]}),
        "record_invalid",
    ),
    ("all forced", _provenance(0, "action_tokens.0.source", "forced"), "record_invalid"),
    (
        "uncovered completion",
        lambda v: v["completions"][0]["provenance"]["action_tokens"].pop(),
        "record_invalid",
    ),
    ("u32 token", _provenance(0, "input_token_ids", [10, 22, 2**32]), "record_invalid"),
    ("mixed policy", _provenance(1, "behavior_policy.implementation", "other"), "record_invalid"),
    ("f32 spelling", _provenance(0, "sampling.top_p", 0.95000001), "record_invalid"),
    ("negative temperature", _provenance(0, "sampling.temperature", -0.5), "record_invalid"),
    (
        "empty budget",
        _provenance(0, "sampling.thinking_budget", {"close_token_ids": [21]}),
        "record_invalid",
    ),
    ("empty stop", _provenance(0, "sampling.stop", [""]), "record_invalid"),
    ("empty invocation", _provenance(0, "template_invocation", {}), "record_invalid"),
    ("empty tools", _provenance(0, "template_invocation.tools", []), "record_invalid"),
    ("null tool_choice", _provenance(0, "template_invocation.tool_choice", None), "record_invalid"),
    ("long backend", _provenance(0, "generation_backend", "x" * 65), "record_invalid"),
]


@pytest.mark.parametrize(
    ("change", "code"),
    [pytest.param(change, code, id=label) for label, change, code in GRPO_NEGATIVE],
)
def test_grpo_row_rejections(change: Callable[[dict[str, Any]], None], code: str) -> None:
    with pytest.raises(KilnError) as caught:
        parse_grpo_group(_row(change), source="train.jsonl", line=3)
    assert caught.value.code == code
    assert caught.value.line == 3 or code == "record_schema_unsupported"


def test_grpo_group_model_is_distinct_from_openenv_group() -> None:
    from kiln_verify.openenv.records.rollout import AgenticGroup

    assert not issubclass(GrpoGroup, AgenticGroup)
    assert (
        GrpoGroup.model_fields["messages"].annotation
        == AgenticGroup.model_fields["messages"].annotation
    )
