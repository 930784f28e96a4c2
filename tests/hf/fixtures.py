"""Small valid HF/TRL documents built through the models (digests computed, not typed)."""

from __future__ import annotations

import copy
from typing import Any

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.hf.digests import (
    adapter_content_revision,
    kept_corpus_digest,
    prompt_messages_digest,
    scored_payload_digest,
)
from kiln_verify.hf.manifest import (
    SFT_INGESTION,
    BaseWeightShard,
    BaseWeightShardManifest,
    ExecutionProvenance,
    ExportManifest,
    GrpoGroup,
    ImportReceipt,
    KernelContract,
    ModelProvenance,
    RejectedRow,
    ResidentModelIdentity,
    SftIngestionReceipt,
    TrainingResult,
    config_value,
)
from kiln_verify.hf.manifest.provenance import (
    BackendProvenance,
    BuildProvenance,
    ConfigurationProvenance,
    PrecisionProvenance,
)


def digest(label: str) -> str:
    return str(sha256_bytes(label.encode()))


def file(path: str, size: int = 10) -> dict[str, Any]:
    return {"relative_path": path, "size_bytes": size, "sha256": digest(path)}


def shards() -> BaseWeightShardManifest:
    return BaseWeightShardManifest.from_shards(
        [
            BaseWeightShard(
                filename="model-00002-of-00002.safetensors",
                size_bytes=22,
                sha256="sha256:" + "2" * 64,
            ),
            BaseWeightShard(
                filename="model-00001-of-00002.safetensors",
                size_bytes=11,
                sha256="sha256:" + "1" * 64,
            ),
        ]
    )


def provenance() -> ExecutionProvenance:
    return ExecutionProvenance.create(
        backend=BackendProvenance(
            name="cpython", device="x86_64", numerical_runtime_sha256=digest("runtime")
        ),
        build=BuildProvenance(
            package_version="0.1.0", target="linux-x86_64", executable_sha256=digest("python")
        ),
        model=ModelProvenance(
            model_config_sha256=digest("kiln_model_config.json"),
            tokenizer_vocab_sha256=digest("vocab"),
            tokenizer_config_sha256=digest("tokenizer.json"),
            chat_template_sha256=digest("chat_template.jinja"),
            training_chat_template_sha256=digest("kiln_training_chat_template.jinja"),
        ),
        precision=PrecisionProvenance(
            inference_dtype="bfloat16", training_policy="external-hf-trl"
        ),
        kernels=KernelContract.create({"python": "3.11.9", "kiln-verify": "0.1.0"}, []),
        configuration=ConfigurationProvenance(
            effective_server_config_sha256=digest("server"),
            effective_environment_sha256=digest("environment"),
        ),
    )


def model() -> dict[str, Any]:
    return {
        "served_model_id": "Qwen/Qwen3.5-4B",
        "base_weight_shard_manifest": shards().to_json(),
        "tokenizer_vocab_sha256": digest("vocab"),
        "model_config": file("kiln_model_config.json"),
        "tokenizer": file("tokenizer.json"),
        "chat_template": file("chat_template.jinja"),
        "native_training_chat_template": file("kiln_training_chat_template.jinja"),
        "trl_training_chat_template": file("training_chat_template.jinja"),
    }


KEPT = [digest("row-1"), digest("row-2")]


def ingestion() -> SftIngestionReceipt:
    return SftIngestionReceipt(
        schema=SFT_INGESTION,
        source="dataset_path",
        source_locator="/data/support-sft.jsonl",
        invalid_row_policy="skip",
        rows_read=3,
        rows_kept=2,
        rows_rejected=1,
        kept_row_hashes=KEPT,
        rejected_rows=[RejectedRow(row_index=2, row_sha256=digest("bad"), reason="invalid_json")],
        kept_corpus_sha256=str(kept_corpus_digest(KEPT)),
    )


def sft_export(*, optional: bool = False) -> ExportManifest:
    kept = str(kept_corpus_digest(KEPT))
    data: dict[str, Any] = {
        "source_name": "inline",
        "format": "sft_messages_jsonl",
        "row_count": 2,
        "ordered_corpus_sha256": kept,
        "dataset": file("train.jsonl"),
        "sft_selection": {
            "invalid_row_policy": "skip",
            "label_policy": "assistant_only_generation_spans",
            "rows_read": 3,
            "rows_kept": 2,
            "rows_rejected": 1,
            "kept_corpus_sha256": kept,
            "ingestion_receipt": file("sft_ingestion.json"),
        },
    }
    fields: dict[str, Any] = {
        "task": "sft",
        "source_execution_provenance": provenance().to_json(),
        "model": model(),
        "data": data,
        "reference_script": file("train.py"),
        "environment_lock": file("requirements.lock"),
    }
    if optional:
        data["split_manifest"] = file("split_manifest.json")
        fields["input_adapter"] = {
            "name": "support-base",
            "config": file("input_adapter/adapter_config.json"),
            "model": file("input_adapter/adapter_model.safetensors"),
            "kiln_manifest": file("input_adapter/adapter_manifest.json"),
        }
    return ExportManifest.create(**fields)


def grpo_export() -> ExportManifest:
    return ExportManifest.create(
        task="grpo",
        source_execution_provenance=provenance().to_json(),
        model=model(),
        data={
            "source_name": "inline",
            "format": "grpo_groups_jsonl",
            "row_count": 1,
            "ordered_corpus_sha256": digest("corpus"),
            "dataset": file("train.jsonl"),
            "rollout_provenance_schema": "kiln.rollout-provenance.v1",
        },
        reference_script=file("train.py"),
        environment_lock=file("requirements.lock"),
    )


def result(export: ExportManifest | None = None) -> TrainingResult:
    export = export or sft_export()
    return TrainingResult.create(
        export_sha256=export.export_sha256,
        task=export.task,
        trainer={
            "kind": "trl_sft_trainer" if export.task == "sft" else "trl_grpo_trainer",
            "python_version": "3.11.9",
            "torch_version": "2.13.0+cpu",
            "transformers_version": "5.24.0",
            "trl_version": "1.16.0",
            "peft_version": "0.21.2",
            "script": file("executed_train.py"),
        },
        effective_config={
            "assistant_only_loss": config_value(True),
            "learning_rate": config_value("2e-5", kind="decimal"),
            "offset": config_value(-3),
            "seed": config_value(42),
            "target_modules": config_value("q_proj"),
            "tags": config_value(["a", "b"]),
        },
        output_adapter={
            "config": file("adapter_config.json"),
            "model": file("adapter_model.safetensors"),
        },
    )


def import_receipt(export: ExportManifest | None = None) -> ImportReceipt:
    export = export or sft_export()
    done = result(export)
    return ImportReceipt.create(
        adapter_name="support-v2",
        task=export.task,
        export_sha256=export.export_sha256,
        result_sha256=done.result_sha256,
        resident_model=ResidentModelIdentity.from_export(export.model),
        used_exported_reference_script=done.uses_reference_script(export),
    )


MESSAGES = [{"role": "user", "content": "a"}]
POLICY = {
    "served_model_id": "Qwen/Qwen3.5-4B",
    "base_model_sha256": str(shards().aggregate_sha256),
    "adapter": {"name": "support-base", "content_sha256": "sha256:" + "0" * 64},
    "inference_config_sha256": digest("inference"),
    "implementation": "kiln-test/cpu",
}


def completion(text: str, reward: float, *, trajectory: bool = False) -> dict[str, Any]:
    segments = [{"role": "assistant", "content": text, "kind": "action"}] if trajectory else []
    out: dict[str, Any] = {"text": text, "reward": reward}
    if trajectory:
        out["trajectory"] = segments
    out["provenance"] = {
        "schema": "kiln.rollout-provenance.v1",
        "input_token_ids": [10, 22, 21],
        "prompt_token_count": 1,
        "prompt_messages_sha256": str(prompt_messages_digest(MESSAGES)),
        "scored_payload_sha256": str(scored_payload_digest(text, segments)),
        "action_tokens": [
            {"sequence_index": 1, "token_id": 22, "source": "sampled", "behavior_logprob": -0.25},
            {"sequence_index": 2, "token_id": 21, "source": "forced", "behavior_logprob": None},
        ],
        "behavior_policy": copy.deepcopy(POLICY),
        "tokenizer": {
            "vocab_sha256": digest("vocab"),
            "config_sha256": digest("tokenizer.json"),
            "chat_template_sha256": digest("chat_template.jinja"),
        },
        "template_invocation": {
            "tools": [{"function": {"name": "f"}, "type": "function"}],
            "template_kwargs": {"enable_thinking": True},
        },
        "sampling": {
            "temperature": 0.7,
            "top_p": 0.95,
            "top_k": 20,
            "min_p": 0.0,
            "max_tokens": 2,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "stop": [],
            "thinking_budget": {"max_tokens": 1, "close_token_ids": [21]},
        },
        "seed": 7,
        "generation_backend": "cpu",
    }
    return out


def grpo_group_json() -> dict[str, Any]:
    return {
        "messages": MESSAGES,
        "completions": [completion("b", 1.0), completion("c", -0.5, trajectory=True)],
    }


def grpo_group() -> GrpoGroup:
    return GrpoGroup.model_validate(grpo_group_json())


CONTENT_REVISION = adapter_content_revision(
    sha256_bytes(b"adapter-weights"), 15, sha256_bytes(b'{"peft_type":"LORA","r":8}')
)
