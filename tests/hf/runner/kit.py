"""Hand-built pristine export bundles for the reference-runner tests (no kiln-verify writer).

The bundle follows the reference JSON shapes directly (the runner is standalone), with a
fake base model whose safetensors shards hold arbitrary bytes: the preflight only hashes them.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from kiln_verify.hf.runner import environment_lock, reference_script

TRAINING_TEMPLATE = (
    "{%- for message in messages -%}{%- if message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- generation -%}{{- message['content'] + '<|im_end|>' -}}{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>\\n' -}}{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
INFERENCE_TEMPLATE = TRAINING_TEMPLATE.replace("{%- generation -%}", "").replace(
    "{%- endgeneration -%}", ""
)
SFT_ROWS = [
    {
        "messages": [
            {"role": "user", "content": "two plus two"},
            {"role": "assistant", "content": "the answer is four"},
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "the arm"},
            {"role": "assistant", "content": "pull the arm"},
        ]
    },
]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(value: Any) -> bytes:
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    ).encode()


def aggregate(shards: list[tuple[str, int]]) -> str:
    records = sorted((bytes.fromhex(d.removeprefix("sha256:")), n) for d, n in shards)
    h = hashlib.sha256(b"kiln.base-model-content.v1\0" + struct.pack("<Q", len(records)))
    for raw, n in records:
        h.update(struct.pack("<Q", n) + raw)
    return "sha256:" + h.hexdigest()


def grpo_corpus(rows: list[bytes]) -> str:
    h = hashlib.sha256(b"kiln.hf-trl-grpo-corpus.v1\0")
    for i, row in enumerate(rows):
        h.update(struct.pack("<QQ", i, len(row)) + row)
    h.update(struct.pack("<Q", len(rows)))
    return "sha256:" + h.hexdigest()


def fake_tokenizer(legacy_merges: bool) -> bytes:
    merges: list[Any] = ["a b", "ab c"] if legacy_merges else [["a", "b"], ["ab", "c"]]
    doc = {"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": merges}}
    return json.dumps(doc).encode()


def make_fake_model(directory: Path) -> Path:
    """Two safetensors shards of arbitrary bytes, a tokenizer.json and a config.json."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model-00001-of-00002.safetensors").write_bytes(b"\x01" * 1000 + b"shard-one")
    (directory / "model-00002-of-00002.safetensors").write_bytes(b"\x02" * 777)
    (directory / "tokenizer.json").write_bytes(fake_tokenizer(legacy_merges=True))
    (directory / "config.json").write_text('{"model_type": "qwen3_5_text"}')
    return directory


def _identity(root: Path, rel: str, data: bytes) -> dict[str, Any]:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"relative_path": rel, "size_bytes": len(data), "sha256": sha(data)}


def seal(manifest: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in manifest.items() if k != "export_sha256"}
    return {**body, "export_sha256": sha(canonical(body))}


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    (root / "kiln_hf_export.json").write_text(json.dumps(manifest, indent=2))


def make_bundle(
    root: Path,
    model_dir: Path,
    *,
    task: str = "sft",
    script: bytes | None = None,
    lock: bytes | None = None,
    sft_rows: list[dict[str, Any]] | None = None,
    grpo_rows: list[dict[str, Any]] | None = None,
    training_template: str = TRAINING_TEMPLATE,
    tokenizer: bytes | None = None,
) -> dict[str, Any]:
    """Write a pristine ``.kiln-hf`` bundle at ``root`` for ``model_dir``; return the manifest."""
    root.mkdir(parents=True)
    shards: list[dict[str, Any]] = []
    for path in sorted(model_dir.glob("*.safetensors")):
        blob = path.read_bytes()
        shards.append({"filename": path.name, "size_bytes": len(blob), "sha256": sha(blob)})
    model_config = canonical({"hidden_size": 64, "vocab_size": 384})
    tok = tokenizer if tokenizer is not None else fake_tokenizer(legacy_merges=False)
    ids = {
        "model_config": _identity(root, "kiln_model_config.json", model_config),
        "tokenizer": _identity(root, "tokenizer.json", tok),
        "chat_template": _identity(root, "chat_template.jinja", INFERENCE_TEMPLATE.encode()),
        "native_training_chat_template": _identity(
            root, "kiln_training_chat_template.jinja", INFERENCE_TEMPLATE.encode() + b" "
        ),
        "trl_training_chat_template": _identity(
            root, "training_chat_template.jinja", training_template.encode()
        ),
    }
    vocab = sha(b"vocab")
    provenance = {
        "schema_version": 1,
        "provenance_type": "kiln.execution-provenance.v1",
        "model": {
            "model_config_sha256": ids["model_config"]["sha256"],
            "tokenizer_vocab_sha256": vocab,
            "tokenizer_config_sha256": ids["tokenizer"]["sha256"],
            "chat_template_sha256": ids["chat_template"]["sha256"],
            "training_chat_template_sha256": ids["native_training_chat_template"]["sha256"],
        },
        "provenance_sha256": sha(b"provenance"),
    }
    if task == "sft":
        rows = sft_rows if sft_rows is not None else SFT_ROWS
        dataset = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows)
        kept = [sha(json.dumps(r).encode()) for r in rows]
        h = hashlib.sha256(b"kiln.sft-kept-corpus.v1\0")
        for k in kept:
            h.update(struct.pack(">Q", len(k)) + k.encode())
        corpus = "sha256:" + h.hexdigest()
        receipt = {
            "schema": "kiln.sft-ingestion.v1",
            "source": "inline",
            "invalid_row_policy": "fail",
            "rows_read": len(rows),
            "rows_kept": len(rows),
            "rows_rejected": 0,
            "kept_row_hashes": kept,
            "rejected_rows": [],
            "kept_corpus_sha256": corpus,
        }
        data: dict[str, Any] = {
            "source_name": "inline",
            "format": "sft_messages_jsonl",
            "row_count": len(rows),
            "ordered_corpus_sha256": corpus,
            "dataset": _identity(root, "train.jsonl", dataset),
            "sft_selection": {
                "invalid_row_policy": "fail",
                "label_policy": "assistant_only_generation_spans",
                "rows_read": len(rows),
                "rows_kept": len(rows),
                "rows_rejected": 0,
                "kept_corpus_sha256": corpus,
                "ingestion_receipt": _identity(
                    root, "sft_ingestion.json", json.dumps(receipt, indent=2).encode()
                ),
            },
        }
    else:
        groups = grpo_rows if grpo_rows is not None else default_grpo_groups()
        encoded = [
            json.dumps(g, separators=(",", ":"), ensure_ascii=False).encode() for g in groups
        ]
        data = {
            "source_name": "inline",
            "format": "grpo_groups_jsonl",
            "row_count": len(groups),
            "ordered_corpus_sha256": grpo_corpus(encoded),
            "dataset": _identity(root, "train.jsonl", b"".join(r + b"\n" for r in encoded)),
            "rollout_provenance_schema": "kiln.rollout-provenance.v1",
        }
    manifest = {
        "schema_version": 1,
        "manifest_type": "kiln.hf-trl-export.v1",
        "task": task,
        "source_execution_provenance": provenance,
        "model": {
            "served_model_id": "tiny/qwen3.5",
            "base_weight_shard_manifest": {
                "schema_version": 1,
                "manifest_type": "kiln.base-weight-shards.v1",
                "aggregate_algorithm": "kiln.base-model-content.v1",
                "aggregate_sha256": aggregate([(s["sha256"], s["size_bytes"]) for s in shards]),
                "total_size_bytes": sum(s["size_bytes"] for s in shards),
                "shards": shards,
            },
            "tokenizer_vocab_sha256": vocab,
            **ids,
        },
        "data": data,
        "reference_script": _identity(
            root, "train.py", script if script is not None else reference_script().data
        ),
        "environment_lock": _identity(
            root, "requirements.lock", lock if lock is not None else environment_lock().data
        ),
    }
    sealed = seal(manifest)
    write_manifest(root, sealed)
    return sealed


def default_grpo_groups() -> list[dict[str, Any]]:
    policy = {
        "served_model_id": "tiny/qwen3.5",
        "base_model_sha256": sha(b"base"),
        "inference_config_sha256": sha(b"cfg"),
        "implementation": "test/cpu",
    }

    def completion(text: str, reward: float) -> dict[str, Any]:
        return {
            "text": text,
            "reward": reward,
            "provenance": {
                "schema": "kiln.rollout-provenance.v1",
                "input_token_ids": [10, 22],
                "prompt_token_count": 1,
                "action_tokens": [
                    {"sequence_index": 1, "token_id": 22, "source": "sampled",
                     "behavior_logprob": -0.5}
                ],
                "behavior_policy": policy,
            },
        }

    return [
        {
            "messages": [{"role": "user", "content": "a"}],
            "completions": [completion("b", 1.0), completion("c", 0.0)],
        },
        {
            "messages": [{"role": "user", "content": "d"}],
            "completions": [completion("e", 0.5), completion("f", -1.0)],
        },
    ]


def fake_site(directory: Path, versions: dict[str, str]) -> Path:
    """A sys.path entry holding only ``*.dist-info`` metadata (no importable modules)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, version in versions.items():
        info = directory / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return directory


def recorded_grpo_groups() -> list[dict[str, Any]]:
    """Two groups x two completions with real token provenance for the tiny model (vocab 384).

    The second completion of each group ends in a forced (thinking-budget close) token (id
    2, the budget's close token). Without a trajectory every completion token is an action
    token (environment tokens are exercised by the multi-turn round trip).
    """
    policy = {
        "served_model_id": "tiny/qwen3.5",
        "base_model_sha256": sha(b"base"),
        "inference_config_sha256": sha(b"cfg"),
        "implementation": "test/cpu",
    }

    def completion(
        prompt: list[int], tokens: list[tuple[int, str, float | None]], reward: float
    ) -> dict[str, Any]:
        ids = prompt + [t for t, _, _ in tokens]
        actions = [
            {
                "sequence_index": len(prompt) + i,
                "token_id": t,
                "source": src,
                "behavior_logprob": lp,
            }
            for i, (t, src, lp) in enumerate(tokens)
            if src != "observation"
        ]
        return {
            "text": "x",
            "reward": reward,
            "provenance": {
                "schema": "kiln.rollout-provenance.v1",
                "input_token_ids": ids,
                "prompt_token_count": len(prompt),
                "action_tokens": actions,
                "behavior_policy": policy,
                "sampling": {"thinking_budget": {"max_tokens": 1, "close_token_ids": [2]}},
            },
        }

    p1, p2 = [1, 40, 41, 2], [1, 50, 51, 52, 2]
    return [
        {
            "messages": [{"role": "user", "content": "two plus two"}],
            "completions": [
                completion(
                    p1,
                    [
                        (60, "sampled", -5.5),
                        (61, "sampled", -5.7),
                        (62, "sampled", -6.0),
                        (2, "sampled", -5.9),
                    ],
                    1.0,
                ),
                completion(p1, [(70, "sampled", -6.1), (2, "forced", None)], 0.0),
            ],
        },
        {
            "messages": [{"role": "user", "content": "pull the arm"}],
            "completions": [
                completion(p2, [(80, "sampled", -5.8), (2, "sampled", -6.2)], 0.25),
                completion(
                    p2, [(90, "sampled", -5.7), (91, "sampled", -5.6), (2, "forced", None)], 0.75
                ),
            ],
        },
    ]
