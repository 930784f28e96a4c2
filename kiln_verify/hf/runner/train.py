#!/usr/bin/env python3
"""kiln-verify HF/TRL reference runner (embedded byte for byte in every export as ``train.py``).

Usage::

    python train.py BUNDLE_DIR --base-model /path/to/hf-model [--verify-only] [options]

The whole preflight (bundle file set, manifest self-digest, every artifact identity, the
base-model shards, the environment lock, the result state) runs with the standard library
only; torch, transformers, peft, trl and datasets are imported only after it has passed.
Exit codes: 0 success, 2 contract violation (the message names the rule and the fix),
130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import re
import shutil
import stat
import struct
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

EXPORT_MANIFEST = "kiln_hf_export.json"
RESULT_MANIFEST = "kiln_hf_result.json"
INCOMPLETE_SENTINEL = ".kiln_hf_result.incomplete"
INCOMPLETE_SENTINEL_TEXT = b"kiln.hf-trl-result.incomplete.v1\n"
EXECUTED_SCRIPT = "executed_train.py"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_MODEL = "adapter_model.safetensors"
RESULT_OUTPUTS = (EXECUTED_SCRIPT, ADAPTER_CONFIG, ADAPTER_MODEL)

EXPORT_TYPE = "kiln.hf-trl-export.v1"
RESULT_TYPE = "kiln.hf-trl-result.v1"
SHARDS_TYPE = "kiln.base-weight-shards.v1"
AGGREGATE_ALGORITHM = "kiln.base-model-content.v1"
PROVENANCE_TYPE = "kiln.execution-provenance.v1"
ROLLOUT_SCHEMA = "kiln.rollout-provenance.v1"
INGESTION_SCHEMA = "kiln.sft-ingestion.v1"

#: The environment lock; ``requirements.lock`` must parse to exactly this mapping.
PINNED_PACKAGES: dict[str, str] = {
    "accelerate": "1.15.0",
    "datasets": "5.2.0",
    "jinja2": "3.1.6",
    "peft": "0.21.2",
    "safetensors": "0.8.0",
    "tokenizers": "0.23.3",
    "torch": "2.13.0",
    "transformers": "5.24.0",
    "trl": "1.16.0",
}
#: The one admitted deviation (``--platform-torch``); the lock must declare the same range.
PLATFORM_TORCH_DIRECTIVE = "# kiln-platform-torch:"
PLATFORM_TORCH_RANGE = ">=2.6,<2.14"
PLATFORM_TORCH_BOUNDS = ((2, 6), (2, 14))

LORA_TARGETS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "in_proj_qkv",
    "in_proj_z",
    "out_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_RECEIPT_BYTES = 512 * 1024 * 1024
MAX_TOKENIZER_BYTES = 512 * 1024 * 1024
MAX_TEMPLATE_BYTES = 16 * 1024 * 1024
MAX_PATH_BYTES = 512
MAX_TEXT_BYTES = 512
MAX_SHARDS = 4096
MAX_GRPO_DATASET_BYTES = 64 * 1024**3
MAX_GRPO_ROW_BYTES = 256 * 1024 * 1024
MAX_GRPO_GROUPS = 10_000_000
#: the largest LoRA rank `kiln-verify hf import-peft` accepts: a larger one trains an adapter
#: the importer refuses, so the runner refuses it first
MAX_LORA_RANK = 65536
MIN_COMPLETIONS, MAX_COMPLETIONS = 2, 1024
MAX_CONFIG_ENTRIES = 256
MAX_CONFIG_BYTES = 65_536
DEFAULT_LORA_RANK = 16
HASH_CHUNK = 4 * 1024 * 1024

SHA256_RE = re.compile(r"sha256:[0-9a-f]{64}")
SHARD_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,255}")
RELEASE_RE = re.compile(r"[0-9]+(\.[0-9]+)*")
#: The TRL training template's assistant spans (``has_generation_blocks`` in the library).
GENERATION_OPEN = re.compile(rb"\{%-?\s*generation\s*-?%\}")
GENERATION_CLOSE = re.compile(rb"\{%-?\s*endgeneration\s*-?%\}")

Json = Any


class ContractError(Exception):
    """A violated contract rule; ``str()`` names the rule and the fix."""

    def __init__(self, rule: str, detail: str, fix: str) -> None:
        super().__init__(f"[{rule}] {detail}; fix: {fix}")
        self.rule = rule


def fail(
    rule: str, detail: str, fix: str = "use a fresh, unmodified copy of the export"
) -> NoReturn:
    raise ContractError(rule, detail, fix)


# ----------------------------------------------------------------------------------------
# canonical JSON and digests


def canonical_json(value: Json) -> bytes:
    """Sorted-key compact UTF-8 JSON (no NaN), the byte form every self-digest hashes."""
    text = json.dumps(
        value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    )
    return text.encode("utf-8")


def sha256_text(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_digest(document: dict[str, Json], own_field: str) -> str:
    """Self-digest of a manifest: canonical JSON of every field but ``own_field``."""
    return sha256_text(canonical_json({k: v for k, v in document.items() if k != own_field}))


def base_model_aggregate(shards: list[tuple[str, int]]) -> str:
    """``kiln.base-model-content.v1`` over (sha256 text, size) pairs, independent of order."""
    records = sorted(
        (bytes.fromhex(digest.removeprefix("sha256:")), size) for digest, size in shards
    )
    h = hashlib.sha256(AGGREGATE_ALGORITHM.encode("ascii") + b"\0")
    h.update(struct.pack("<Q", len(records)))
    for raw, size in records:
        h.update(struct.pack("<Q", size))
        h.update(raw)
    return "sha256:" + h.hexdigest()


def grpo_corpus_digest(rows: list[bytes]) -> str:
    """``kiln.hf-trl-grpo-corpus.v1`` over canonical rows (without their LF)."""
    h = _grpo_corpus_hasher()
    for index, row in enumerate(rows):
        _grpo_corpus_update(h, index, row)
    return _grpo_corpus_finish(h, len(rows))


def _grpo_corpus_hasher() -> Any:
    return hashlib.sha256(b"kiln.hf-trl-grpo-corpus.v1\0")


def _grpo_corpus_update(h: Any, index: int, row: bytes) -> None:
    h.update(struct.pack("<QQ", index, len(row)))
    h.update(row)


def _grpo_corpus_finish(h: Any, count: int) -> str:
    h.update(struct.pack("<Q", count))
    return "sha256:" + str(h.hexdigest())


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"non-finite JSON number {name}")


def _unique_object(pairs: list[tuple[str, Json]]) -> dict[str, Json]:
    out: dict[str, Json] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate JSON key {key!r}")
        out[key] = value
    return out


def _parse_int(digits: str) -> int | float:
    # serde_json (and kiln-verify) read -0 as the float -0.0, so no integer field takes it
    return -0.0 if digits == "-0" else int(digits)


def strict_json(data: bytes, what: str) -> Json:
    """Strict UTF-8 JSON: duplicate keys, NaN/Infinity, trailing data and lone surrogate
    escapes (``"\\ud800"``, which no UTF-8 text can hold) are rejected, as by the library's
    reader (tests/hf/runner/test_parity.py)."""
    try:
        value: Json = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_unique_object,
            parse_constant=_reject_constant,
            parse_int=_parse_int,
        )
        _compact(value)  # UnicodeEncodeError (a ValueError) on a lone surrogate
        return value
    except (UnicodeDecodeError, ValueError) as exc:
        fail("strict-json", f"{what} is not strict JSON ({exc})")


# ----------------------------------------------------------------------------------------
# bundle file access (no symlinks anywhere)


def check_relative_path(path: Json, what: str) -> str:
    if not isinstance(path, str) or not path:
        fail("artifact-path", f"{what}: relative_path must be a non-empty string")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES or "\\" in path or path.startswith("/"):
        fail("artifact-path", f"{what}: path {path!r} is absolute, too long or has a backslash")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        fail("artifact-path", f"{what}: path {path!r} has control characters")
    if any(part in ("", ".", "..") for part in path.split("/")):
        fail("artifact-path", f"{what}: path {path!r} has an empty, '.' or '..' component")
    return path


def open_in_bundle(root: str, relative: str) -> int:
    """Open ``root/relative`` read-only, refusing a symlink or non-directory at every level."""
    parts = relative.split("/")
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        current = os.open(root, flags_dir)
    except OSError as exc:
        fail("bundle-root", f"cannot open bundle directory {root!r} ({exc})")
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, flags_dir, dir_fd=current)
            except OSError:
                fail("artifact-missing", f"{relative}: parent {part!r} is not a real directory")
            os.close(current)
            current = nxt
        try:
            st = os.stat(parts[-1], dir_fd=current, follow_symlinks=False)
        except FileNotFoundError:
            fail("artifact-missing", f"{relative} is missing")
        if not stat.S_ISREG(st.st_mode):
            fail("artifact-not-regular", f"{relative} is not a regular file (symlink or special)")
        fd = os.open(
            parts[-1], os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=current
        )
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            fail("artifact-not-regular", f"{relative} changed into a non-regular file")
        return fd
    finally:
        os.close(current)


def hash_fd(fd: int, limit: int | None = None) -> tuple[int, str]:
    """(size, sha256 text) of everything readable from ``fd``; closes it."""
    h = hashlib.sha256()
    size = 0
    buf = bytearray(HASH_CHUNK)
    view = memoryview(buf)
    with os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view)
            if not n:
                break
            size += n
            if limit is not None and size > limit:
                fail("artifact-size", f"file exceeds {limit} bytes")
            h.update(view[:n])
    return size, "sha256:" + h.hexdigest()


def read_bundle_file(root: str, relative: str, limit: int) -> bytes:
    fd = open_in_bundle(root, relative)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        fail("artifact-size", f"{relative} exceeds {limit} bytes")
    return data


def list_files(root: str) -> set[str]:
    """Every regular file under ``root`` (relative, '/'-separated); anything else fails."""
    found: set[str] = set()

    def walk(directory: str, prefix: str) -> None:
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_symlink():
                    fail("bundle-file-set", f"{rel} is a symbolic link")
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, rel + "/")
                elif entry.is_file(follow_symlinks=False):
                    found.add(rel)
                else:
                    fail("bundle-file-set", f"{rel} is not a regular file or directory")

    walk(root, "")
    return found


# ----------------------------------------------------------------------------------------
# small shape validators


def obj(
    value: Json, what: str, required: set[str], optional: frozenset[str] = frozenset()
) -> dict[str, Json]:
    if not isinstance(value, dict):
        fail("manifest-shape", f"{what} must be a JSON object")
    keys = set(value)
    missing = required - keys
    unknown = keys - required - optional
    if missing or unknown:
        fail(
            "manifest-shape",
            f"{what}: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}",
        )
    return value


def sha(value: Json, what: str) -> str:
    if not isinstance(value, str) or not SHA256_RE.fullmatch(value):
        fail("manifest-shape", f"{what} must be sha256:<64 lowercase hex>")
    return value


def text(value: Json, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    if (
        not isinstance(value, str)
        or not value
        or value != value.strip()
        or len(value.encode("utf-8")) > limit
        or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)
    ):
        fail("manifest-shape", f"{what} must be trimmed non-empty text of at most {limit} bytes")
    return value


def uint(value: Json, what: str, minimum: int = 0, maximum: int = 2**64 - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        fail("manifest-shape", f"{what} must be an integer in [{minimum}, {maximum}]")
    return value


def const(value: Json, expected: Json, what: str) -> None:
    if type(value) is not type(expected) or value != expected:
        fail("manifest-version", f"{what} must be {expected!r}, found {value!r}")


@dataclass(frozen=True)
class Identity:
    relative_path: str
    size_bytes: int
    sha256: str


def identity(value: Json, what: str, path: str) -> Identity:
    o = obj(value, what, {"relative_path", "size_bytes", "sha256"})
    rel = check_relative_path(o["relative_path"], what)
    if rel != path:
        fail("artifact-path", f"{what} must be at {path!r}, found {rel!r}")
    return Identity(rel, uint(o["size_bytes"], f"{what}.size_bytes", 1), sha(o["sha256"], what))


def verify_identity(root: str, ident: Identity, limit: int | None = None) -> None:
    if limit is not None and ident.size_bytes > limit:
        fail("artifact-size", f"{ident.relative_path} declares more than {limit} bytes")
    size, digest = hash_fd(open_in_bundle(root, ident.relative_path), limit)
    if size != ident.size_bytes or digest != ident.sha256:
        fail(
            "artifact-identity",
            f"{ident.relative_path}: bytes differ from the manifest identity "
            f"(size {size} vs {ident.size_bytes})",
        )


def read_verified(root: str, ident: Identity, limit: int) -> bytes:
    """A declared file's bytes read through one descriptor and proven to be its identity's:
    whatever is checked or used after the identity pass is the very bytes it hashed."""
    data = read_bundle_file(root, ident.relative_path, limit)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if len(data) != ident.size_bytes or digest != ident.sha256:
        fail("artifact-identity", f"{ident.relative_path} changed after it was verified")
    return data


class VerifiedLines:
    """The LF-terminated lines of a declared file, hashed as they are read; :meth:`check`
    after the last line proves they were the identity's bytes."""

    def __init__(self, root: str, ident: Identity) -> None:
        self.ident = ident
        self.stream = os.fdopen(open_in_bundle(root, ident.relative_path), "rb")
        self.hasher = hashlib.sha256()
        self.size = 0

    def __iter__(self) -> Iterator[bytes]:
        with self.stream:
            for line in self.stream:
                self.hasher.update(line)
                self.size += len(line)
                yield line

    def check(self) -> None:
        digest = "sha256:" + self.hasher.hexdigest()
        if self.size != self.ident.size_bytes or digest != self.ident.sha256:
            fail("artifact-identity", f"{self.ident.relative_path} changed after it was verified")


def manifest_identity(bundle: Bundle, section: str, key: str, path: str) -> Identity:
    """The identity ``manifest[section][key]`` of a file the preflight verified."""
    entry = bundle.manifest[section][key]
    return Identity(path, entry["size_bytes"], entry["sha256"])


# ----------------------------------------------------------------------------------------
# the export bundle


@dataclass
class Bundle:
    root: str
    manifest: dict[str, Json]
    task: str
    export_sha256: str
    rows: int
    declared: set[str]
    shards: list[tuple[str, int, str]]
    tokenizer: Identity
    reference_script: Identity
    has_input_adapter: bool
    grpo_width: int = 0
    extras: dict[str, Json] = field(default_factory=dict)


def parse_lock(data: bytes) -> tuple[dict[str, str], str | None]:
    """(name -> version, platform-torch range or None) of a ``requirements.lock``."""
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        fail("environment-lock", "requirements.lock is not UTF-8")
    pins: dict[str, str] = {}
    platform: str | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(PLATFORM_TORCH_DIRECTIVE):
            if platform is not None:
                fail("environment-lock", "requirements.lock declares kiln-platform-torch twice")
            platform = stripped[len(PLATFORM_TORCH_DIRECTIVE) :].strip()
            continue
        if not stripped or stripped.startswith("#"):
            continue
        if any(c in stripped for c in ";[]@ \t") or stripped.count("==") != 1:
            fail("environment-lock", f"requirements.lock line {line!r} is not name==version")
        name, version = stripped.split("==")
        name = name.lower().replace("_", "-")
        if not name or not version or name in pins:
            fail("environment-lock", f"requirements.lock line {line!r} is empty or duplicate")
        pins[name] = version
    return pins, platform


def check_bundle_root(root: str) -> None:
    """Step 2: the bundle root is a real directory, not a link or a file."""
    try:
        st = os.lstat(root)
    except OSError as exc:
        fail("bundle-root", f"bundle {root!r} cannot be read ({exc})", "pass the .kiln-hf dir")
    if not stat.S_ISDIR(st.st_mode):
        fail(
            "bundle-root",
            f"bundle {root!r} is not a real directory (symlink or file)",
            "pass the extracted .kiln-hf directory itself",
        )


def read_export_manifest(root: str) -> tuple[dict[str, Json], str, str]:
    """Step 3: the export manifest: strict JSON, closed keys, versions, self-digest."""
    manifest = strict_json(
        read_bundle_file(root, EXPORT_MANIFEST, MAX_MANIFEST_BYTES), EXPORT_MANIFEST
    )
    m = obj(
        manifest,
        EXPORT_MANIFEST,
        {
            "schema_version",
            "manifest_type",
            "task",
            "source_execution_provenance",
            "model",
            "data",
            "reference_script",
            "environment_lock",
            "export_sha256",
        },
        frozenset({"input_adapter"}),
    )
    const(m["schema_version"], 1, "schema_version")
    const(m["manifest_type"], EXPORT_TYPE, "manifest_type")
    task = m["task"]
    if task not in ("sft", "grpo"):
        fail("manifest-shape", f"task must be 'sft' or 'grpo', found {task!r}")
    export_sha256 = sha(m["export_sha256"], "export_sha256")
    if canonical_digest(m, "export_sha256") != export_sha256:
        fail("manifest-digest", "export_sha256 does not match the manifest's canonical digest")
    return m, task, export_sha256



MODEL_FILES = {
    "model_config": "kiln_model_config.json",
    "tokenizer": "tokenizer.json",
    "chat_template": "chat_template.jinja",
    "native_training_chat_template": "kiln_training_chat_template.jinja",
    "trl_training_chat_template": "training_chat_template.jinja",
}


def check_model_section(
    m: dict[str, Json],
) -> tuple[dict[str, Identity], str, list[tuple[str, int, str]]]:
    """Step 4: the model section: served id, vocabulary digest, shard manifest (§5.4) and
    the five model-file identities."""
    # model
    model = obj(
        m["model"],
        "model",
        {
            "served_model_id",
            "base_weight_shard_manifest",
            "tokenizer_vocab_sha256",
            "model_config",
            "tokenizer",
            "chat_template",
            "native_training_chat_template",
            "trl_training_chat_template",
        },
    )
    text(model["served_model_id"], "model.served_model_id")
    vocab = sha(model["tokenizer_vocab_sha256"], "model.tokenizer_vocab_sha256")
    shards = check_shard_manifest(model["base_weight_shard_manifest"])
    model_ids = {
        key: identity(model[key], f"model.{key}", path) for key, path in MODEL_FILES.items()
    }
    return model_ids, vocab, shards



def check_provenance_cross(m: dict[str, Json], model_ids: dict[str, Identity], vocab: str) -> None:
    """Step 6: the source execution provenance names exactly the exported model files."""
    # provenance cross-check (shape of the record beyond these fields is kiln-verify's job)
    prov = m["source_execution_provenance"]
    if not isinstance(prov, dict):
        fail("manifest-shape", "source_execution_provenance must be a JSON object")
    const(prov.get("schema_version"), 1, "source_execution_provenance.schema_version")
    const(prov.get("provenance_type"), PROVENANCE_TYPE, "source_execution_provenance type")
    sha(prov.get("provenance_sha256"), "source_execution_provenance.provenance_sha256")
    pmodel = obj(
        prov.get("model"),
        "source_execution_provenance.model",
        {"model_config_sha256", "tokenizer_vocab_sha256", "tokenizer_config_sha256"},
        frozenset({"chat_template_sha256", "training_chat_template_sha256"}),
    )
    expected = {
        "model_config_sha256": model_ids["model_config"].sha256,
        "tokenizer_config_sha256": model_ids["tokenizer"].sha256,
        "tokenizer_vocab_sha256": vocab,
        "chat_template_sha256": model_ids["chat_template"].sha256,
        "training_chat_template_sha256": model_ids["native_training_chat_template"].sha256,
    }
    for key, want in expected.items():
        if pmodel.get(key, want) != want:
            fail(
                "provenance-cross-check",
                f"source_execution_provenance.model.{key} differs from the exported file",
            )



def input_adapter_identities(m: dict[str, Json]) -> list[Identity]:
    """Step 5 (input adapter): the identities of the exported input adapter's files."""
    to_verify: list[Identity] = []
    # input adapter
    if "input_adapter" in m:
        adapter = obj(
            m["input_adapter"],
            "input_adapter",
            {"name", "config", "model"},
            frozenset({"kiln_manifest"}),
        )
        text(adapter["name"], "input_adapter.name")
        to_verify.append(
            identity(adapter["config"], "input_adapter.config", "input_adapter/adapter_config.json")
        )
        to_verify.append(
            identity(
                adapter["model"], "input_adapter.model", "input_adapter/adapter_model.safetensors"
            )
        )
        if "kiln_manifest" in adapter:
            to_verify.append(
                identity(
                    adapter["kiln_manifest"],
                    "input_adapter.kiln_manifest",
                    "input_adapter/adapter_manifest.json",
                )
            )

    return to_verify


@dataclass
class DataSection:
    """The checked data section: task data identities and the numbers they must match."""

    fields: dict[str, Json]
    rows: int
    corpus: str
    dataset: Identity
    receipt: Identity | None
    identities: list[Identity]


def check_data_section(m: dict[str, Json], task: str) -> DataSection:
    """Step 7 (declarations): format, row count, corpus digest, dataset, split manifest
    and, for SFT, the selection and its ingestion receipt."""
    to_verify: list[Identity] = []
    # data
    data = m["data"]
    common = {"source_name", "format", "row_count", "ordered_corpus_sha256", "dataset"}
    if task == "sft":
        d = obj(data, "data", common | {"sft_selection"}, frozenset({"split_manifest"}))
        const(d["format"], "sft_messages_jsonl", "data.format")
    else:
        d = obj(data, "data", common | {"rollout_provenance_schema"}, frozenset({"split_manifest"}))
        const(d["format"], "grpo_groups_jsonl", "data.format")
        const(d["rollout_provenance_schema"], ROLLOUT_SCHEMA, "data.rollout_provenance_schema")
    text(d["source_name"], "data.source_name")
    rows = uint(
        d["row_count"], "data.row_count", 1, MAX_GRPO_GROUPS if task == "grpo" else 2**64 - 1
    )
    corpus = sha(d["ordered_corpus_sha256"], "data.ordered_corpus_sha256")
    dataset = identity(d["dataset"], "data.dataset", "train.jsonl")
    to_verify.append(dataset)
    if "split_manifest" in d:
        to_verify.append(
            identity(d["split_manifest"], "data.split_manifest", "split_manifest.json")
        )
    receipt: Identity | None = None
    if task == "sft":
        sel = obj(
            d["sft_selection"],
            "data.sft_selection",
            {
                "invalid_row_policy",
                "label_policy",
                "rows_read",
                "rows_kept",
                "rows_rejected",
                "kept_corpus_sha256",
                "ingestion_receipt",
            },
        )
        if sel["invalid_row_policy"] not in ("fail", "skip"):
            fail("manifest-shape", "sft_selection.invalid_row_policy must be 'fail' or 'skip'")
        const(sel["label_policy"], "assistant_only_generation_spans", "label_policy")
        read = uint(sel["rows_read"], "rows_read")
        kept = uint(sel["rows_kept"], "rows_kept", 1)
        rejected = uint(sel["rows_rejected"], "rows_rejected")
        if kept != rows or read != kept + rejected:
            fail("manifest-shape", "row_count, rows_kept, rows_read and rows_rejected disagree")
        if sha(sel["kept_corpus_sha256"], "kept_corpus_sha256") != corpus:
            fail("manifest-shape", "ordered_corpus_sha256 differs from kept_corpus_sha256")
        receipt = identity(
            sel["ingestion_receipt"], "sft_selection.ingestion_receipt", "sft_ingestion.json"
        )
        to_verify.append(receipt)
    else:
        if dataset.size_bytes > MAX_GRPO_DATASET_BYTES:
            fail("grpo-corpus", "train.jsonl exceeds 64 GiB")

    return DataSection(d, rows, corpus, dataset, receipt, to_verify)


def load_bundle(root: str) -> Bundle:
    """Verify a pristine (or recoverable) export bundle per the §3.2 checks 1-14, 16, as
    the named steps above, in order."""
    check_bundle_root(root)
    m, task, export_sha256 = read_export_manifest(root)
    declared = {EXPORT_MANIFEST}
    model_ids, vocab, shards = check_model_section(m)
    to_verify: list[Identity] = list(model_ids.values())
    check_provenance_cross(m, model_ids, vocab)
    has_adapter = "input_adapter" in m
    to_verify.extend(input_adapter_identities(m))
    data = check_data_section(m, task)
    to_verify.extend(data.identities)
    d, rows, corpus, dataset, receipt = (
        data.fields, data.rows, data.corpus, data.dataset, data.receipt
    )
    reference_script = identity(m["reference_script"], "reference_script", "train.py")
    lock = identity(m["environment_lock"], "environment_lock", "requirements.lock")
    to_verify.extend([reference_script, lock])

    verify_artifacts(root, declared, to_verify)
    bundle = Bundle(
        root,
        m,
        task,
        export_sha256,
        rows,
        declared,
        shards,
        model_ids["tokenizer"],
        reference_script,
        has_adapter,
    )
    if task == "sft":
        assert receipt is not None
        check_sft_task_data(root, d, receipt, dataset, rows, model_ids)
    else:
        bundle.grpo_width = scan_grpo_corpus(root, rows, corpus)
    check_environment_lock(root, lock)
    return bundle


def verify_artifacts(root: str, declared: set[str], identities: list[Identity]) -> None:
    """Step 5: every declared path once; every artifact's size and SHA-256 (no links)."""
    for ident in identities:
        declared.add(ident.relative_path)
    if len(declared) != len(identities) + 1:
        fail("manifest-shape", "two artifact identities share one path")
    for ident in identities:
        verify_identity(root, ident)


def check_sft_task_data(
    root: str,
    d: dict[str, Json],
    receipt: Identity,
    dataset: Identity,
    rows: int,
    model_ids: dict[str, Identity],
) -> None:
    """Step 7 (SFT): the ingestion receipt, the rows and the TRL template's generation
    blocks."""
    check_ingestion_receipt(root, d, receipt)
    check_sft_rows(root, rows, dataset)
    template = read_verified(root, model_ids["trl_training_chat_template"], MAX_TEMPLATE_BYTES)
    if not (GENERATION_OPEN.search(template) and GENERATION_CLOSE.search(template)):
        fail(
            "training-template",
            "training_chat_template.jinja has no {% generation %} ... {% endgeneration %} "
            "blocks, so assistant-only labels cannot be derived",
        )


def check_environment_lock(root: str, lock: Identity) -> None:
    """Step 8: requirements.lock declares exactly this runner's pins and platform range."""
    pins, platform = parse_lock(read_verified(root, lock, 1024 * 1024))
    if pins != PINNED_PACKAGES or platform != PLATFORM_TORCH_RANGE:
        fail(
            "environment-lock",
            "requirements.lock does not declare exactly this runner's pins and platform range",
        )


def check_shard_manifest(value: Json) -> list[tuple[str, int, str]]:
    s = obj(
        value,
        "base_weight_shard_manifest",
        {
            "schema_version",
            "manifest_type",
            "aggregate_algorithm",
            "aggregate_sha256",
            "total_size_bytes",
            "shards",
        },
    )
    const(s["schema_version"], 1, "base_weight_shard_manifest.schema_version")
    const(s["manifest_type"], SHARDS_TYPE, "base_weight_shard_manifest.manifest_type")
    const(s["aggregate_algorithm"], AGGREGATE_ALGORITHM, "aggregate_algorithm")
    raw = s["shards"]
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_SHARDS:
        fail("base-shards", f"shards must be a list of 1..{MAX_SHARDS} entries")
    shards: list[tuple[str, int, str]] = []
    previous = ""
    for index, entry in enumerate(raw):
        e = obj(entry, f"shards[{index}]", {"filename", "size_bytes", "sha256"})
        name = e["filename"]
        if (
            not isinstance(name, str)
            or not SHARD_NAME_RE.fullmatch(name)
            or not name.endswith(".safetensors")
            or name in (".", "..")
        ):
            fail("base-shards", f"shard filename {name!r} is not a plain *.safetensors basename")
        if name <= previous:
            fail("base-shards", "shard filenames must be strictly increasing")
        previous = name
        shards.append(
            (
                name,
                uint(e["size_bytes"], f"shards[{index}].size_bytes", 1),
                sha(e["sha256"], f"shards[{index}].sha256"),
            )
        )
    total = uint(s["total_size_bytes"], "total_size_bytes", 1)
    if total != sum(size for _, size, _ in shards):
        fail("base-shards", "total_size_bytes is not the sum of the shard sizes")
    if base_model_aggregate([(d, size) for _, size, d in shards]) != sha(
        s["aggregate_sha256"], "aggregate_sha256"
    ):
        fail("base-shards", "aggregate_sha256 does not match the shards (base-model-content.v1)")
    return shards


def check_ingestion_receipt(root: str, data: dict[str, Json], receipt: Identity) -> None:
    doc = strict_json(read_verified(root, receipt, MAX_RECEIPT_BYTES), receipt.relative_path)
    r = obj(
        doc,
        "sft_ingestion.json",
        {
            "schema",
            "source",
            "invalid_row_policy",
            "rows_read",
            "rows_kept",
            "rows_rejected",
            "kept_row_hashes",
            "rejected_rows",
            "kept_corpus_sha256",
        },
        frozenset({"source_locator"}),
    )
    const(r["schema"], INGESTION_SCHEMA, "sft_ingestion.json schema")
    sel = data["sft_selection"]
    for key in (
        "invalid_row_policy",
        "rows_read",
        "rows_kept",
        "rows_rejected",
        "kept_corpus_sha256",
    ):
        if r[key] != sel[key]:
            fail("ingestion-receipt", f"sft_ingestion.json {key} differs from sft_selection")
    if r["source"] != data["source_name"]:
        fail("ingestion-receipt", "sft_ingestion.json source differs from data.source_name")
    kept, rejected = r["kept_row_hashes"], r["rejected_rows"]
    if (
        not isinstance(kept, list)
        or len(kept) != r["rows_kept"]
        or not isinstance(rejected, list)
        or len(rejected) != r["rows_rejected"]
    ):
        fail("ingestion-receipt", "sft_ingestion.json row lists disagree with their counts")
    h = hashlib.sha256(b"kiln.sft-kept-corpus.v1\0")
    for index, row_hash in enumerate(kept):
        encoded = sha(row_hash, f"kept_row_hashes[{index}]").encode("ascii")
        h.update(struct.pack(">Q", len(encoded)))
        h.update(encoded)
    if "sha256:" + h.hexdigest() != r["kept_corpus_sha256"]:
        fail("ingestion-receipt", "kept_corpus_sha256 does not match kept_row_hashes")


def check_sft_rows(root: str, rows: int, dataset: Identity) -> None:
    count = 0
    lines = VerifiedLines(root, dataset)
    for number, line in enumerate(lines, 1):
        row = strict_json(line, f"train.jsonl line {number}") if line.strip() else None
        if (
            not isinstance(row, dict)
            or set(row) != {"messages"}
            or not isinstance(row["messages"], list)
            or not row["messages"]
        ):
            fail("sft-dataset", f'train.jsonl line {number} is not {{"messages": [...]}}')
        count += 1
    lines.check()
    if count != rows:
        fail("sft-dataset", f"train.jsonl has {count} rows, the manifest declares {rows}")


def _compact(value: Json) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
        "utf-8"
    )


def iter_grpo_rows(root: str, relative: str = "train.jsonl") -> Iterator[tuple[bytes, Json]]:
    fd = open_in_bundle(root, relative)
    with os.fdopen(fd, "rb") as f:
        number = 0
        while True:
            line = f.readline(MAX_GRPO_ROW_BYTES + 1)
            if not line:
                return
            number += 1
            if len(line) > MAX_GRPO_ROW_BYTES or not line.endswith(b"\n"):
                fail("grpo-corpus", f"train.jsonl row {number} is oversized or lacks its LF")
            row = line[:-1]
            group = strict_json(row, f"train.jsonl row {number}")
            if _compact(group) != row:
                fail("grpo-corpus", f"train.jsonl row {number} is not canonical compact JSON")
            yield row, group


def _token_id(value: Json) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


def check_action_tokens(prov: dict[str, Json], trajectory: bool, where: str) -> None:
    """The §4.7 token rules of one completion (RolloutProvenanceV1::validate)."""
    ids, count = prov.get("input_token_ids"), prov.get("prompt_token_count")
    if (
        not isinstance(ids, list)
        or not ids
        or not all(_token_id(t) for t in ids)
        or not isinstance(count, int)
        or isinstance(count, bool)
        or not 1 <= count <= len(ids)
    ):
        fail("grpo-action-tokens", f"{where}: input_token_ids/prompt_token_count are invalid")
    sampling = prov.get("sampling")
    budget = sampling.get("thinking_budget") if isinstance(sampling, dict) else None
    close = budget.get("close_token_ids") if isinstance(budget, dict) else None
    actions = prov.get("action_tokens")
    if not isinstance(actions, list) or not actions:
        fail("grpo-action-tokens", f"{where}: action_tokens must be a non-empty list")
    previous, positions, sampled = -1, [], 0
    for action in actions:
        a = obj(action, f"{where} action token", {"sequence_index", "token_id", "source"},
                frozenset({"behavior_logprob"}))  # fmt: skip
        index = uint(a["sequence_index"], f"{where} sequence_index")
        if index == previous:
            fail("grpo-action-overlap", f"{where}: position {index} is listed twice (the "
                 "sampled and forced masks overlap)")  # fmt: skip
        if index < previous or not count <= index < len(ids) or a["token_id"] != ids[index]:
            fail("grpo-action-tokens", f"{where}: action token {index} is out of order, "
                 "outside the completion or not the sequence's token")  # fmt: skip
        previous = index
        positions.append(index)
        logprob = a.get("behavior_logprob")
        if a["source"] == "sampled":
            if (
                isinstance(logprob, bool)
                or not isinstance(logprob, int | float)
                or not math.isfinite(logprob)
                or logprob > 1e-6
            ):
                fail("grpo-action-tokens", f"{where}: sampled token {index} has no log-prob")
            sampled += 1
        elif a["source"] != "forced" or logprob is not None:
            fail("grpo-action-tokens", f"{where}: token {index} is neither sampled nor forced")
        elif not isinstance(close, list) or a["token_id"] not in close:
            fail("grpo-forced-token", f"{where}: forced token {index} is not one of the "
                 "thinking budget's close_token_ids")  # fmt: skip
    if not sampled:
        fail("grpo-action-tokens", f"{where}: no action token is sampled")
    if not trajectory and positions != list(range(count, len(ids))):
        fail("grpo-action-tokens", f"{where}: without a trajectory every completion position "
             "must be an action token")  # fmt: skip


def scan_grpo_corpus(root: str, rows: int, corpus: str) -> int:
    """Stream the GRPO corpus: framing, digest, row count, one uniform width; returns it."""
    h = _grpo_corpus_hasher()
    width = 0
    policy: Json = None
    count = 0
    for row, group in iter_grpo_rows(root):
        if count >= MAX_GRPO_GROUPS:
            fail("grpo-corpus", "train.jsonl has more than 10,000,000 groups")
        g = obj(group, f"group {count}", {"messages", "completions"})
        comps = g["completions"]
        if not isinstance(g["messages"], list) or not g["messages"]:
            fail("grpo-corpus", f"group {count} has no messages")
        if not isinstance(comps, list) or not MIN_COMPLETIONS <= len(comps) <= MAX_COMPLETIONS:
            fail("grpo-corpus", f"group {count} must have 2..1024 completions")
        if width and len(comps) != width:
            fail("grpo-corpus", "groups have different completion counts (one width required)")
        width = len(comps)
        for c_index, completion in enumerate(comps):
            c = obj(
                completion,
                f"group {count} completion {c_index}",
                {"text", "reward", "provenance"},
                frozenset({"trajectory"}),
            )
            reward = c["reward"]
            if (
                isinstance(reward, bool)
                or not isinstance(reward, int | float)
                or not math.isfinite(float(reward))
            ):
                fail("grpo-corpus", f"group {count} completion {c_index} has no finite reward")
            prov = c["provenance"]
            if not isinstance(prov, dict) or prov.get("schema") != ROLLOUT_SCHEMA:
                fail("grpo-corpus", f"group {count} completion {c_index} lacks rollout provenance")
            check_action_tokens(prov, "trajectory" in c, f"group {count} completion {c_index}")
            if policy is None:
                policy = prov.get("behavior_policy")
            elif prov.get("behavior_policy") != policy:
                fail("grpo-corpus", "completions carry different behaviour policies")
        _grpo_corpus_update(h, count, row)
        count += 1
    if count != rows:
        fail("grpo-corpus", f"train.jsonl has {count} groups, the manifest declares {rows}")
    if _grpo_corpus_finish(h, count) != corpus:
        fail("grpo-corpus", "ordered_corpus_sha256 does not match train.jsonl")
    return width


# ----------------------------------------------------------------------------------------
# token replay of trajectory rows (after the preflight; imports tokenizers and transformers'
# template renderer, never torch). Mirrors the library's token-stream rule
# (docs/hf-contract.md, "The token stream of a trajectory");
# tests/hf/runner/test_stream.py runs both side by side on the same rows.
# Single-generation rows are replayed by kiln-verify itself at export and verification.

THINK_CLOSE = "</think>"
RESERVED_TEMPLATE_ARGUMENTS = frozenset(
    {
        "messages",
        "add_generation_prompt",
        "tools",
        "tool_choice",
        "conversations",
        "documents",
        "chat_template",
        "continue_final_message",
        "return_assistant_tokens_mask",
    }
)
STREAM_FIX = "record the corpus again with the exported tokenizer and chat template"


class StreamCodec:
    """The exported tokenizer.json and chat_template.jinja: render, encode, decode."""

    def __init__(self, tokenizer_json: bytes, template: bytes) -> None:
        try:
            from tokenizers import Tokenizer
            from transformers.utils.chat_template_utils import render_jinja_template
        except ImportError:
            fail(
                "grpo-replay-unavailable",
                "token replay needs tokenizers and transformers (with jinja2)",
                "install the pinned requirements.lock",
            )
        self.render_jinja: Any = render_jinja_template
        try:
            self.tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
            self.template = template.decode("utf-8")
        except Exception as exc:
            fail("grpo-replay-prompt", f"the exported tokenizer or template does not load: {exc}")
        self.special = frozenset(
            int(i) for i, t in self.tokenizer.get_added_tokens_decoder().items() if t.special
        )

    def render(
        self, messages: list[Json], invocation: dict[str, Json], generation: bool, rule: str
    ) -> str:
        kwargs = dict(invocation.get("template_kwargs") or {})
        clash = sorted(RESERVED_TEMPLATE_ARGUMENTS & kwargs.keys())
        if clash:
            fail(rule, f"template_kwargs sets {clash[0]!r}, which the template call owns")
        if invocation.get("tool_choice") is not None:
            kwargs["tool_choice"] = invocation["tool_choice"]
        try:
            rendered, _ = self.render_jinja(
                conversations=[[dict(m) for m in messages]],
                tools=invocation.get("tools"),
                chat_template=self.template,
                add_generation_prompt=generation,
                **kwargs,
            )
            text = rendered[0]
        except ImportError:
            fail("grpo-replay-unavailable", "chat templates need jinja2", "install the lock")
        except Exception as exc:
            fail(rule, f"the conversation does not render: {type(exc).__name__}", STREAM_FIX)
        if not isinstance(text, str):
            fail(rule, "the chat template did not render text", STREAM_FIX)
        return text

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False).ids]

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))


def first_difference(a: Any, b: Any) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def stream_action_stop(
    codec: StreamCodec, ids: list[int], content: str, final: bool, thinking: bool
) -> str | None:
    """The stop-token text with which ``ids`` spell ``content`` ("" for none), or None."""
    options = [(ids, "")]
    if ids and ids[-1] in codec.special:
        options.append((ids[:-1], codec.decode(ids[-1:])))
    for body, stop in options:
        decoded = codec.decode(body)
        if decoded == content:
            return stop
        if final and thinking:
            head, sep, tail = decoded.partition(THINK_CLOSE)
            if sep and not tail.strip() and head == content:
                return stop
    return None


def stream_next_turn(
    codec: StreamCodec,
    invocation: dict[str, Json],
    text: str,
    action_ids: list[int],
    content: str,
    next_chat: list[Json],
    where: str,
) -> tuple[str, list[int]]:
    """Turn k+1 from turn k: its rendering and the environment tokens appended."""
    stop = stream_action_stop(codec, action_ids, content, False, False)
    if stop is None:
        at = first_difference(codec.decode(action_ids), content)
        fail("grpo-stream-action-text", f"{where}: the action tokens differ at character {at}")
    rendered = codec.render(next_chat, invocation, True, "grpo-stream-unrenderable")
    head = text + content
    if not rendered.startswith(head) or not rendered[len(head) :].startswith(stop):
        fail(
            "grpo-stream-template",
            f"{where}: the next turn renders differently from character "
            f"{first_difference(rendered, head + stop)}: the template is not prefix-preserving",
            "use a prefix-preserving chat template",
        )
    return rendered, codec.encode(rendered[len(head) + len(stop) :])


def stream_check_forced(
    codec: StreamCodec,
    ids: list[int],
    sources: list[str],
    budget: Json,
    thinking: bool,
    where: str,
) -> None:
    """Forced tokens are the budget's close tokens, once, where the budget ran out."""
    forced = [i for i, s in enumerate(sources) if s == "forced"]
    b = budget if isinstance(budget, dict) else None
    limit = b.get("max_tokens") if b else None
    timed = b is not None and b.get("max_time_ms") is not None
    if not forced:
        bound = limit if isinstance(limit, int) and thinking and not timed else len(ids)
        if len(ids) > bound and THINK_CLOSE not in codec.decode(ids[:bound]):
            fail("grpo-stream-forced", f"{where}: the reasoning ran past the budget")
        return
    if not thinking or b is None:
        fail("grpo-stream-forced", f"{where}: forced tokens without a thinking budget")
    close = list(b.get("close_token_ids") or [])
    start = forced[0]
    if forced != list(range(start, start + len(close))) or ids[start : start + len(close)] != close:
        fail("grpo-stream-forced", f"{where}: the forced tokens are not one run of close tokens")
    if isinstance(limit, int) and (start > limit or (start < limit and not timed)):
        fail("grpo-stream-forced", f"{where}: close tokens forced after {start} tokens")
    if THINK_CLOSE in codec.decode(ids[:start]):
        fail("grpo-stream-forced", f"{where}: close tokens forced after the reasoning closed")


def replay_trajectory_row(
    codec: StreamCodec,
    messages: list[Json],
    completion: dict[str, Json],
    where: str,
) -> None:
    """The whole stream of one trajectory completion (the library's replay, mirrored)."""
    prov = completion["provenance"]
    assert isinstance(prov, dict)
    invocation = prov.get("template_invocation") or {}
    assert isinstance(invocation, dict)
    thinking = (invocation.get("template_kwargs") or {}).get("enable_thinking") is True
    ids: list[int] = list(prov["input_token_ids"])
    count: int = prov["prompt_token_count"]
    actions = {t["sequence_index"]: t["source"] for t in prov["action_tokens"]}
    budget = (prov.get("sampling") or {}).get("thinking_budget")
    segments = completion["trajectory"]
    assert isinstance(segments, list)
    turns = []
    for s in segments:
        message = {"role": s["role"], "content": s["content"]}
        if s.get("tool_call_id") is not None:
            message["tool_call_id"] = s["tool_call_id"]
        turns.append(message)
    text = codec.render(messages, invocation, True, "grpo-replay-prompt")
    prompt = codec.encode(text)
    if ids[:count] != prompt or len(prompt) != count:
        fail("grpo-replay-prompt", f"{where}: the recorded prompt differs at token "
             f"{first_difference(ids[:count], prompt)}", STREAM_FIX)  # fmt: skip
    action_at = [i for i, s in enumerate(segments) if s.get("kind") == "action"]
    roles = {segments[i]["role"] for i in action_at}
    if not action_at or action_at[0] != 0 or roles != {"assistant"}:
        fail("grpo-stream-unrenderable", f"{where}: the trajectory does not start with an "
             "assistant action", STREAM_FIX)  # fmt: skip
    pos, length = count, len(ids)
    for number, seg in enumerate(action_at):
        here = f"{where} action {number}"
        content = segments[seg]["content"]
        if pos >= length or pos not in actions:
            fail("grpo-stream-boundary", f"{here}: token {pos} does not begin the action")
        end = pos
        while end < length and end in actions:
            end += 1
        run, sources = ids[pos:end], [actions[i] for i in range(pos, end)]
        if number == len(action_at) - 1:
            if end != length:
                fail("grpo-stream-boundary", f"{here}: token {end} follows the last action")
            if stream_action_stop(codec, run, content, True, thinking) is None:
                fail("grpo-stream-action-text", f"{here}: the action tokens differ from the text")
            closed = codec.render(messages + turns[: seg + 1], invocation, False,
                                  "grpo-stream-unrenderable")  # fmt: skip
            if not closed.startswith(text + content):
                fail("grpo-stream-template", f"{here}: the template rewrites the last turn",
                     "use a prefix-preserving chat template")  # fmt: skip
            stream_check_forced(codec, run, sources, budget, thinking, here)
            return
        next_chat = messages + turns[: action_at[number + 1]]
        try:
            text_next, env = stream_next_turn(
                codec, invocation, text, run, content, next_chat, here
            )
        except ContractError as exc:
            if exc.rule == "grpo-stream-action-text":
                where_run = (pos, end, text, content, here)
                classify_action_extent(codec, invocation, ids, next_chat, *where_run)
            raise
        stream_check_forced(codec, run, sources, budget, thinking, here)
        if ids[end : end + len(env)] != env:
            at = end + first_difference(ids[end : end + len(env)], env)
            fail("grpo-stream-environment", f"{here}: token {at} is not the rendered environment")
        marked = next((i for i in range(end, end + len(env)) if i in actions), None)
        if marked is not None:
            fail("grpo-stream-environment-marked",
                 f"{here}: environment token {marked} is marked as an action token")  # fmt: skip
        text, pos = text_next, end + len(env)


def classify_action_extent(
    codec: StreamCodec,
    invocation: dict[str, Json],
    ids: list[int],
    next_chat: list[Json],
    pos: int,
    end: int,
    text: str,
    content: str,
    where: str,
) -> None:
    """A run that does not spell its action: find the extent that would and name it."""
    rendered = codec.render(next_chat, invocation, True, "grpo-stream-unrenderable")
    horizon = min(len(ids), pos + len(content.encode("utf-8")) + 8)
    for stop in range(pos + 1, horizon + 1):
        if stop == end:
            continue
        closing = stream_action_stop(codec, ids[pos:stop], content, False, False)
        head = text + content + (closing or "")
        if closing is None or not rendered.startswith(head):
            continue
        env = codec.encode(rendered[len(head) :])
        if ids[stop : stop + len(env)] != env:
            continue
        if stop < end:
            fail("grpo-stream-environment-marked",
                 f"{where}: environment token {stop} is marked as an action token")  # fmt: skip
        fail("grpo-stream-boundary", f"{where}: token {end} belongs to the action but is unmarked")


def replay_grpo_corpus(bundle: Bundle) -> int:
    """Replay every trajectory completion of the verified corpus; returns how many. The
    codec (and with it tokenizers and transformers) is loaded at the first trajectory."""

    def load_codec() -> StreamCodec:
        return StreamCodec(
            read_verified(bundle.root, bundle.tokenizer, MAX_TOKENIZER_BYTES),
            read_verified(
                bundle.root,
                manifest_identity(bundle, "model", "chat_template", "chat_template.jinja"),
                MAX_TEMPLATE_BYTES,
            ),
        )

    dataset = manifest_identity(bundle, "data", "dataset", "train.jsonl")
    lines = VerifiedLines(bundle.root, dataset)
    replayed = 0
    codec: StreamCodec | None = None
    for number, line in enumerate(lines, start=1):
        group = strict_json(line[:-1], f"train.jsonl row {number}")
        assert isinstance(group, dict)
        messages = group["messages"]
        for index, completion in enumerate(group["completions"]):
            if "trajectory" in completion:
                if codec is None:
                    codec = load_codec()
                where = f"train.jsonl line {number} completion {index}"
                replay_trajectory_row(codec, messages, completion, where)
                replayed += 1
    lines.check()
    return replayed


# ----------------------------------------------------------------------------------------
# base model, script, environment, result state


def _normalize_tokenizer(doc: Json) -> Json:
    model = doc.get("model") if isinstance(doc, dict) else None
    if isinstance(model, dict) and isinstance(model.get("merges"), list):
        merges = []
        for merge in model["merges"]:
            if isinstance(merge, str) and merge.count(" ") == 1:
                merges.append(merge.split(" "))
            elif (
                isinstance(merge, list)
                and len(merge) == 2
                and all(isinstance(p, str) for p in merge)
            ):
                merges.append(list(merge))
            else:
                fail("base-model-tokenizer", f"tokenizer merge {merge!r} is not two strings")
        doc = dict(doc)
        doc["model"] = dict(model, merges=merges)
    return doc


def verify_base_model(bundle: Bundle, base: str) -> None:
    """Hash every base-weight shard and compare the tokenizer semantically (§3.2 step 15)."""
    fix = "pass --base-model the exact HF model directory the export was made from"
    real = os.path.realpath(base)
    if not os.path.isdir(real):
        fail("base-model", f"--base-model {base!r} is not a directory", fix)
    for name, size, digest in bundle.shards:
        path = os.path.join(real, name)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            fail("base-model", f"base shard {name} is missing", fix)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            fail("base-model", f"base shard {name} is not a regular file", fix)
        got_size, got = hash_fd(fd)
        if got_size != size or got != digest:
            fail("base-model", f"base shard {name} differs from the exported shard identity", fix)
    tok_path = os.path.join(real, "tokenizer.json")
    if not os.path.isfile(tok_path):
        fail("base-model", "the base model directory has no tokenizer.json", fix)
    with open(tok_path, "rb") as f:
        raw = f.read(MAX_TOKENIZER_BYTES + 1)
    if not raw or len(raw) > MAX_TOKENIZER_BYTES:
        fail("base-model", "the base model tokenizer.json is empty or too large", fix)
    ours = strict_json(raw, "base model tokenizer.json")
    exported = strict_json(
        read_verified(bundle.root, bundle.tokenizer, MAX_TOKENIZER_BYTES), "tokenizer.json"
    )
    if not isinstance(ours, dict) or not isinstance(exported, dict):
        fail("base-model-tokenizer", "tokenizer.json must be a JSON object", fix)
    if _normalize_tokenizer(ours) != _normalize_tokenizer(exported):
        fail("base-model-tokenizer", "the base model tokenizer differs from the exported one", fix)
    if not os.path.isfile(os.path.join(real, "config.json")):
        fail("base-model", "the base model directory has no config.json", fix)


def running_script_bytes() -> bytes:
    with open(os.path.realpath(__file__), "rb") as f:
        return f.read()


def release_tuple(version: str) -> tuple[int, ...] | None:
    public = version.split("+", 1)[0]
    if not RELEASE_RE.fullmatch(public):
        return None
    return tuple(int(p) for p in public.split("."))


def check_packages(platform_torch: bool) -> dict[str, str]:
    """Installed versions of the pinned packages (metadata only, nothing is imported)."""
    fix = "python -m pip install -r requirements.lock (in the bundle) into this environment"
    found: dict[str, str] = {}
    for name, pin in sorted(PINNED_PACKAGES.items()):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            fail("environment-lock", f"package {name}=={pin} is not installed", fix)
        found[name] = version
        if version.split("+", 1)[0] == pin:
            continue
        if name == "torch" and platform_torch:
            release = release_tuple(version)
            low, high = PLATFORM_TORCH_BOUNDS
            if release is not None and low <= release < high:
                continue
            fail(
                "environment-lock",
                f"platform torch {version} is outside the lock's admitted range "
                f"{PLATFORM_TORCH_RANGE}",
                "install a torch release inside that range",
            )
        hint = " (a host platform torch build needs --platform-torch)" if name == "torch" else ""
        fail(
            "environment-lock",
            f"installed {name} {version} differs from the lock's {pin}{hint}",
            fix,
        )
    return found


def check_world_size() -> None:
    value = os.environ.get("WORLD_SIZE", "1")
    if value.strip() != "1":
        fail(
            "world-size",
            f"WORLD_SIZE={value!r}; the reference runner is single-process",
            "run train.py directly with python (no torchrun/accelerate launch), WORLD_SIZE=1",
        )


def result_state(bundle: Bundle, recover: bool) -> list[str]:
    """Check the files beyond the pristine set; returns the recoverable residue (§3.6)."""
    present = list_files(bundle.root)
    missing = bundle.declared - present
    if missing:
        fail("bundle-file-set", f"declared files are missing: {sorted(missing)}")
    extras = present - bundle.declared
    if RESULT_MANIFEST in extras:
        fail(
            "existing-result",
            "kiln_hf_result.json already exists (this copy was trained)",
            "extract a fresh copy of the export and train that",
        )
    residue = sorted(extras & set(RESULT_OUTPUTS))
    if INCOMPLETE_SENTINEL in extras:
        other = extras - set(RESULT_OUTPUTS) - {INCOMPLETE_SENTINEL}
        if other:
            fail(
                "unattributed-outputs",
                f"unexpected files in the bundle: {sorted(other)}",
                "remove them or extract a fresh copy of the export",
            )
        if not recover:
            fail(
                "interrupted-run",
                "an interrupted run left .kiln_hf_result.incomplete",
                "rerun training (it removes that residue) or extract a fresh copy",
            )
        return [*residue, INCOMPLETE_SENTINEL]
    if extras:
        fail(
            "unattributed-outputs",
            f"files not in the export: {sorted(extras)}",
            "remove them or extract a fresh copy of the export",
        )
    return []


def remove_residue(root: str, names: list[str]) -> None:
    for name in names:
        path = os.path.join(root, name)
        if not stat.S_ISREG(os.lstat(path).st_mode):
            fail("unattributed-outputs", f"{name} is not a regular file")
        os.unlink(path)
    fsync_dir(root)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------
# command line


def _decimal(low: float | None, high: float | None, low_open: bool = False) -> Callable[[str], str]:
    def parse(value: str) -> str:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a decimal") from None
        if (
            not math.isfinite(number)
            or (low is not None and number < low)
            or (low_open and low is not None and number <= low)
            or (high is not None and number > high)
        ):
            raise argparse.ArgumentTypeError(f"{value!r} is out of range")
        return value

    return parse


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be > 0")
    return number


def _lora_rank(value: str) -> int:
    rank = _positive(value)
    if rank > MAX_LORA_RANK:
        raise argparse.ArgumentTypeError(
            f"{value!r} exceeds MAX_LORA_RANK={MAX_LORA_RANK} (the importer's bound)"
        )
    return rank


def _seed(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if not 0 <= number <= 2**32 - 1:
        raise argparse.ArgumentTypeError("seed must be in [0, 2**32 - 1]")
    return number


def _targets(value: str) -> list[str]:
    items = value.split(",")
    if any(not item or item not in LORA_TARGETS for item in items) or len(set(items)) != len(items):
        raise argparse.ArgumentTypeError(
            f"target modules must be distinct names from {','.join(LORA_TARGETS)}"
        )
    return items


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py", description=__doc__.split("\n")[0] if __doc__ else None
    )
    p.add_argument("bundle", help="writable copy of an extracted .kiln-hf export directory")
    p.add_argument(
        "--base-model", required=True, help="local HF model directory whose shards match the export"
    )
    p.add_argument(
        "--verify-only",
        action="store_true",
        help="run the whole preflight, import nothing, print one JSON status line",
    )
    p.add_argument(
        "--allow-custom-script",
        action="store_true",
        help="run although this file differs from the exported train.py",
    )
    p.add_argument(
        "--platform-torch",
        action="store_true",
        help="admit the host's platform torch build within the lock's declared range",
    )
    p.add_argument("--learning-rate", type=_decimal(0.0, None, True), default="2e-5")
    p.add_argument("--epochs", type=_decimal(0.0, None, True), default="1.0")
    p.add_argument("--batch-size", type=_positive, default=1)
    p.add_argument("--gradient-accumulation-steps", type=_positive, default=1)
    p.add_argument("--max-length", type=_positive, default=None)
    p.add_argument("--seed", type=_seed, default=42)
    p.add_argument("--dtype", choices=("auto", "bfloat16", "float16", "float32"), default="auto")
    p.add_argument("--lr-scheduler", choices=("constant", "linear", "cosine"), default="linear")
    p.add_argument("--warmup-ratio", type=_decimal(0.0, 1.0), default="0.0")
    p.add_argument("--weight-decay", type=_decimal(0.0, None), default="0.0")
    p.add_argument("--max-grad-norm", type=_decimal(0.0, None), default="1.0")
    p.add_argument("--beta", type=_decimal(0.0, None), default="0.1")
    p.add_argument("--epsilon", type=_decimal(0.0, 1.0), default="0.2")
    p.add_argument("--epsilon-high", type=_decimal(0.0, None), default=None)
    p.add_argument(
        "--loss-type", choices=("grpo", "dapo", "bnpo", "dr_grpo", "cispo"), default="dapo"
    )
    p.add_argument("--importance-sampling-level", choices=("token", "sequence"), default="token")
    p.add_argument("--scale-rewards", choices=("group", "batch", "none"), default="none")
    p.add_argument("--lora-rank", type=_lora_rank, default=None)
    p.add_argument("--lora-alpha", type=_positive, default=None)
    p.add_argument("--lora-dropout", type=_decimal(0.0, 1.0), default=None)
    p.add_argument("--target-modules", type=_targets, default=None)
    p.add_argument("--no-gradient-checkpointing", action="store_true")
    p.add_argument("--keep-work-dir", action="store_true")
    return p


@dataclass
class Preflight:
    bundle: Bundle
    script: bytes
    script_match: bool
    packages: dict[str, str]
    residue: list[str]


LORA_SHAPE_FLAGS = ("lora_rank", "lora_alpha", "lora_dropout", "target_modules")


def check_route_flags(args: argparse.Namespace, bundle: Bundle) -> None:
    """Flags the bundle's route cannot honour: LoRA shape flags next to an exported input
    adapter (it is trained as it is), and for GRPO ``--max-length`` and a ``--batch-size``
    that does not divide the groups."""
    shaped = any(getattr(args, k) is not None for k in LORA_SHAPE_FLAGS)
    if bundle.task == "sft" and bundle.has_input_adapter and shaped:
        fail(
            "lora-flags",
            "LoRA shape flags are forbidden when the export has an input adapter",
            "drop --lora-rank/--lora-alpha/--lora-dropout/--target-modules",
        )
    if bundle.task == "grpo":
        if args.max_length is not None:
            fail(
                "grpo-flags",
                "--max-length is not accepted for recorded GRPO",
                "drop --max-length (sequence boundaries come from the provenance)",
            )
        if bundle.rows % args.batch_size:
            fail(
                "grpo-flags",
                f"--batch-size {args.batch_size} does not divide the {bundle.rows} groups",
                "choose a --batch-size that divides the group count",
            )
        if bundle.has_input_adapter and shaped:
            fail(
                "lora-flags",
                "LoRA shape flags are forbidden with an input adapter",
                "drop the LoRA shape flags",
            )


def check_running_script(bundle: Bundle, allow_custom: bool) -> tuple[bytes, bool]:
    """(the running file's bytes, whether they are the exported ``reference_script``); a
    difference fails unless ``--allow-custom-script``."""
    script = running_script_bytes()
    match = (
        sha256_text(script) == bundle.reference_script.sha256
        and len(script) == bundle.reference_script.size_bytes
    )
    if not match and not allow_custom:
        fail(
            "custom-script",
            "this train.py differs from the exported reference script",
            "run the exported train.py, or pass --allow-custom-script to run a modified one",
        )
    return script, match


def preflight(args: argparse.Namespace) -> Preflight:
    """Every check that precedes importing torch (standard library only), in order."""
    check_world_size()
    bundle = load_bundle(os.path.abspath(args.bundle))
    check_route_flags(args, bundle)
    residue = result_state(bundle, recover=not args.verify_only)
    verify_base_model(bundle, args.base_model)
    script, match = check_running_script(bundle, args.allow_custom_script)
    packages = check_packages(args.platform_torch)
    return Preflight(bundle, script, match, packages, residue)


def status_line(payload: dict[str, Json]) -> str:
    return json.dumps(payload, sort_keys=True, ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        pre = preflight(args)
        if pre.bundle.task == "grpo":
            replay_grpo_corpus(pre.bundle)
        if args.verify_only:
            print(
                status_line(
                    {
                        "export_sha256": pre.bundle.export_sha256,
                        "reference_script_match": pre.script_match,
                        "rows": pre.bundle.rows,
                        "status": "verified",
                        "task": pre.bundle.task,
                        "torch_version": pre.packages["torch"],
                    }
                )
            )
            return 0
        if pre.residue:
            remove_residue(pre.bundle.root, pre.residue)
        result = train(args, pre)
        print(status_line({"result": result, "status": "complete"}))
        return 0
    except ContractError as exc:
        print(f"kiln HF/TRL contract error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kiln HF/TRL runner: interrupted", file=sys.stderr)
        return 130


# ----------------------------------------------------------------------------------------
# training (imports the ML stack lazily)


def train(args: argparse.Namespace, pre: Preflight) -> str:
    bundle = pre.bundle
    name = os.path.basename(bundle.root.rstrip("/"))
    work = tempfile.mkdtemp(prefix=f".{name}.{bundle.task}-work-", dir=os.path.dirname(bundle.root))
    try:
        # trainer logs go to stderr: stdout carries only the one JSON status line
        with contextlib.redirect_stdout(sys.stderr):
            route = train_sft if bundle.task == "sft" else train_grpo
            adapter_dir, config = route(args, bundle, work)
        return publish(bundle, pre, adapter_dir, config, args.platform_torch)
    finally:
        if not args.keep_work_dir:
            shutil.rmtree(work, ignore_errors=True)


def save_adapter(model: Any, adapter_dir: str, adapters: list[str]) -> None:
    """Save the named PEFT adapters with byte-stable configs.

    PEFT writes set-valued config fields (``target_modules``) as ``list(set)``, whose
    order follows string hash randomization, so two identical runs would publish different
    ``adapter_config.json`` bytes (and content revisions); sets are sorted first.
    """
    for config in model.peft_config.values():
        for key, value in vars(config).items():
            if isinstance(value, set | frozenset):
                setattr(config, key, sorted(value))
    model.save_pretrained(adapter_dir, safe_serialization=True, selected_adapters=adapters)


def resolve_dtype(choice: str) -> str:
    if choice != "auto":
        return choice
    import torch

    if torch.cuda.is_available():
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "float16"
    return "float32"


def normalize_messages(messages: list[Json]) -> list[Json]:
    """HF chat form: '' content with tool calls -> None; JSON-string arguments -> objects."""
    out: list[Json] = []
    for message in messages:
        message = dict(message)
        calls = message.get("tool_calls")
        if calls:
            if message.get("content") == "":
                message["content"] = None
            fixed = []
            for call in calls:
                call = dict(call)
                for holder in (call, call.get("function")):
                    if isinstance(holder, dict) and isinstance(holder.get("arguments"), str):
                        parsed = strict_json(holder["arguments"].encode("utf-8"), "arguments")
                        if not isinstance(parsed, dict):
                            fail("sft-dataset", "tool call arguments must be a JSON object")
                        holder["arguments"] = parsed
                fixed.append(call)
            message["tool_calls"] = fixed
        out.append(message)
    return out


def tagged(kind: str, value: Json) -> dict[str, Json]:
    return {"kind": kind, "value": value}


def _adapt_config_fields(kwargs: dict[str, Any], config_class: Any, checkpointing: bool) -> None:
    """Map the runner's settings onto the installed transformers' argument names."""
    fields = getattr(config_class, "__dataclass_fields__", {})
    if "warmup_ratio" not in fields:  # transformers 5.2x: warmup_steps takes a float ratio
        ratio = kwargs.pop("warmup_ratio")
        if ratio >= 1.0:
            fail(
                "warmup-ratio",
                "this transformers takes warmup ratios below 1 only",
                "pass --warmup-ratio below 1",
            )
        kwargs["warmup_steps"] = ratio
    if checkpointing:
        kwargs["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if "activation_checkpointing" in fields:  # transformers >= 5.2x renamed the flag
        kwargs["activation_checkpointing"] = kwargs.pop("gradient_checkpointing")
        if checkpointing:
            kwargs["activation_checkpointing_kwargs"] = kwargs.pop("gradient_checkpointing_kwargs")


def lora_shape(args: argparse.Namespace) -> tuple[int, int, str, list[str]]:
    """The fresh LoRA the flags ask for: (rank, alpha, dropout text, target modules).

    Unset flags mean rank 16, alpha twice the rank, dropout 0 and every supported target;
    the trainer's LoRA config and the result's effective configuration both read it here,
    so what is recorded is what was trained.
    """
    rank = args.lora_rank or DEFAULT_LORA_RANK
    alpha = args.lora_alpha or 2 * rank
    return rank, alpha, args.lora_dropout or "0.0", list(args.target_modules or LORA_TARGETS)


def trainable_lora(args: argparse.Namespace, bundle: Bundle, model: Any) -> tuple[Any, Any]:
    """(model, LoRA config for the trainer or None).

    An exported input adapter is loaded as the trainable LoRA itself: it is also (base +
    adapter) the behaviour policy a recorded corpus was sampled under, and for GRPO with
    beta > 0 TRL copies it into the frozen "ref" adapter, so the KL reference is the
    initial adapter. Without one, a fresh LoRA is configured from the flags.
    """
    from peft import LoraConfig, PeftModel

    if bundle.has_input_adapter:
        path = os.path.join(bundle.root, "input_adapter")
        return PeftModel.from_pretrained(model, path, is_trainable=True), None
    rank, alpha, dropout, targets = lora_shape(args)
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=float(dropout),
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return model, config


def add_lora_entries(config: dict[str, Json], args: argparse.Namespace, peft_config: Any) -> None:
    """The effective configuration's LoRA shape; none for an exported input adapter, which
    is trained as it is."""
    if peft_config is None:
        return
    rank, alpha, dropout, targets = lora_shape(args)
    config["lora_rank"] = tagged("unsigned", rank)
    config["lora_alpha"] = tagged("unsigned", alpha)
    config["lora_dropout"] = tagged("decimal", dropout)
    config["target_modules"] = tagged("text", ",".join(targets))


def load_tokenizer(base_model: str) -> Any:
    """The base model's fast tokenizer (its ``tokenizer.json`` matched the export's in the
    preflight); TRL needs a fast one for assistant masks and recorded token ids."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(
        base_model, local_files_only=True, trust_remote_code=False, use_fast=True
    )
    if not getattr(tokenizer, "is_fast", False):
        fail("tokenizer", "the base model tokenizer is not a fast tokenizer")
    return tokenizer


def ensure_pad_token(tokenizer: Any) -> None:
    """Batching needs a pad token: the eos token stands in when the model has none."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            fail("tokenizer", "the tokenizer has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token


@dataclass
class TrainableModel:
    """The seeded base model in its dtype with the LoRA to train (both routes)."""

    model: Any
    peft_config: Any
    dtype: str
    checkpointing: bool


def load_trainable_model(args: argparse.Namespace, bundle: Bundle) -> TrainableModel:
    """Seed, load the base model in the resolved dtype, set checkpointing and attach the
    LoRA (a fresh one, or the exported input adapter)."""
    import torch
    from transformers import AutoModelForCausalLM, set_seed

    dtype = resolve_dtype(args.dtype)
    set_seed(args.seed)
    model: Any = AutoModelForCausalLM.from_pretrained(
        args.base_model, local_files_only=True, trust_remote_code=False, dtype=getattr(torch, dtype)
    )
    checkpointing = not args.no_gradient_checkpointing
    model.config.use_cache = not checkpointing
    model, peft_config = trainable_lora(args, bundle, model)
    return TrainableModel(model, peft_config, dtype, checkpointing)


def trainer_config_kwargs(
    args: argparse.Namespace, work: str, loaded: TrainableModel
) -> dict[str, Any]:
    """The TRL config settings both routes pass alike: the flags, an explicit seed, no
    shuffling, no checkpoints saved, no reporting integrations, CPU without CUDA."""
    import torch

    return dict(
        output_dir=os.path.join(work, "trainer"),
        learning_rate=float(args.learning_rate),
        num_train_epochs=float(args.epochs),
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        shuffle_dataset=False,
        seed=args.seed,
        data_seed=args.seed,
        bf16=loaded.dtype == "bfloat16",
        fp16=loaded.dtype == "float16",
        gradient_checkpointing=loaded.checkpointing,
        optim="adamw_torch",
        lr_scheduler_type=args.lr_scheduler,
        warmup_ratio=float(args.warmup_ratio),
        weight_decay=float(args.weight_decay),
        max_grad_norm=float(args.max_grad_norm),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
    )


# ----------------------------------------------------------------------------------------
# SFT route


def load_sft_rows(bundle: Bundle) -> list[Json]:
    """Step 1: the rows the preflight verified, read again through one descriptor and
    proven to be the same bytes, in HF chat form."""
    rows: list[Json] = []
    lines = VerifiedLines(bundle.root, manifest_identity(bundle, "data", "dataset", "train.jsonl"))
    for line in lines:
        row = strict_json(line, "train.jsonl row")
        rows.append({"messages": normalize_messages(row["messages"])})
    lines.check()  # the rows trained on are the rows the preflight verified
    return rows


def sft_tokenizer(args: argparse.Namespace, bundle: Bundle, work: str) -> tuple[Any, str]:
    """Step 2: (the tokenizer with the verified TRL training template, the path of a
    private copy of that template in the work directory, which is what TRL reads)."""
    template_bytes = read_verified(
        bundle.root,
        manifest_identity(
            bundle, "model", "trl_training_chat_template", "training_chat_template.jinja"
        ),
        MAX_TEMPLATE_BYTES,
    )
    template = template_bytes.decode("utf-8")
    # TRL reads the template by path: give it a private copy of the verified bytes
    template_path = os.path.join(work, "training_chat_template.jinja")
    write_new(work, "training_chat_template.jinja", template_bytes)
    tokenizer = load_tokenizer(args.base_model)
    tokenizer.chat_template = template
    ensure_pad_token(tokenizer)
    return tokenizer, template_path


def sft_max_length(args: argparse.Namespace, tokenizer: Any, rows: list[Json]) -> int:
    """Step 3: render every row; each must have assistant generation tokens, and
    ``--max-length`` may not truncate any (default: the longest row)."""
    longest = 0
    for index, row in enumerate(rows):
        rendered = tokenizer.apply_chat_template(
            row["messages"],
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
            add_generation_prompt=False,
        )
        mask = rendered["assistant_masks"]
        if not mask or not any(mask):
            fail("sft-dataset", f"row {index + 1} has no assistant generation tokens")
        longest = max(longest, len(rendered["input_ids"]))
    if args.max_length is not None and args.max_length < longest:
        fail(
            "max-length",
            f"--max-length {args.max_length} would truncate a {longest}-token row",
            f"pass --max-length >= {longest} or omit it",
        )
    return int(args.max_length or longest)


@dataclass
class SftInputs:
    """What the SFT trainer is built from and its effective configuration records."""

    rows: list[Json]
    tokenizer: Any
    template_path: str
    max_length: int


def build_sft_trainer(
    args: argparse.Namespace, work: str, inputs: SftInputs, loaded: TrainableModel
) -> Any:
    """Step 5: TRL's ``SFTTrainer`` with assistant-only loss, no packing and a sequential
    sampler, over the rows in their verified order."""
    from datasets import Dataset  # type: ignore[import-untyped]
    from trl import SFTConfig, SFTTrainer  # type: ignore[attr-defined]

    config_kwargs = trainer_config_kwargs(args, work, loaded)
    config_kwargs.update(
        per_device_train_batch_size=args.batch_size,
        max_length=inputs.max_length,
        assistant_only_loss=True,
        completion_only_loss=False,
        chat_template_path=inputs.template_path,
        packing=False,
        dataset_num_proc=1,
        train_sampling_strategy="sequential",
    )
    _adapt_config_fields(config_kwargs, SFTConfig, loaded.checkpointing)
    return SFTTrainer(
        model=loaded.model,
        args=SFTConfig(**config_kwargs),
        train_dataset=Dataset.from_list(inputs.rows),
        processing_class=inputs.tokenizer,
        peft_config=loaded.peft_config,
    )


def sft_effective_config(
    args: argparse.Namespace, bundle: Bundle, inputs: SftInputs, loaded: TrainableModel
) -> dict[str, Json]:
    """Step 6: the tagged effective configuration of the result (§3.5)."""
    dtype = loaded.dtype
    config: dict[str, Json] = {
        "assistant_only_loss": tagged("boolean", True),
        "base_model": tagged("text", args.base_model),
        "bf16": tagged("boolean", dtype == "bfloat16"),
        "fp16": tagged("boolean", dtype == "float16"),
        "dataset_rows": tagged("unsigned", len(inputs.rows)),
        "dtype": tagged("text", dtype),
        "epochs": tagged("decimal", args.epochs),
        "gradient_accumulation_steps": tagged("unsigned", args.gradient_accumulation_steps),
        "gradient_checkpointing": tagged("boolean", loaded.checkpointing),
        "input_adapter": tagged("boolean", bundle.has_input_adapter),
        "learning_rate": tagged("decimal", args.learning_rate),
        "lr_scheduler_type": tagged("text", args.lr_scheduler),
        "max_grad_norm": tagged("decimal", args.max_grad_norm),
        "max_length": tagged("unsigned", inputs.max_length),
        "optimizer": tagged("text", "adamw_torch"),
        "packing": tagged("boolean", False),
        "per_device_train_batch_size": tagged("unsigned", args.batch_size),
        "platform_torch": tagged("boolean", bool(args.platform_torch)),
        "seed": tagged("unsigned", args.seed),
        "shuffle_dataset": tagged("boolean", False),
        "warmup_ratio": tagged("decimal", args.warmup_ratio),
        "weight_decay": tagged("decimal", args.weight_decay),
    }
    add_lora_entries(config, args, loaded.peft_config)
    return config


def train_sft(args: argparse.Namespace, bundle: Bundle, work: str) -> tuple[str, dict[str, Json]]:
    """The SFT route: rows, tokenizer, lengths, model, trainer, train, save."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rows = load_sft_rows(bundle)
    tokenizer, template_path = sft_tokenizer(args, bundle, work)
    inputs = SftInputs(rows, tokenizer, template_path, sft_max_length(args, tokenizer, rows))
    loaded = load_trainable_model(args, bundle)  # step 4
    trainer = build_sft_trainer(args, work, inputs, loaded)
    trainer.train()
    adapter_dir = os.path.join(work, "adapter")
    if trainer.is_world_process_zero():
        save_adapter(trainer.model, adapter_dir, ["default"])
    return adapter_dir, sft_effective_config(args, bundle, inputs, loaded)


# ----------------------------------------------------------------------------------------
# recorded-GRPO route (§3.4)


def _prompt_text(messages: Json) -> str:
    """The dataset prompt of a group: canonical compact JSON text of its messages."""
    return json.dumps(messages, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def completion_record(provenance: dict[str, Json]) -> dict[str, Json]:
    """Recorded token ids of one completion as TRL rollout fields.

    Sampled action positions carry their recorded behaviour log-prob and env_mask 1; forced
    tokens and environment/observation tokens carry 0.0 and env_mask 0.
    """
    ids = provenance.get("input_token_ids")
    count = provenance.get("prompt_token_count")
    if (
        not isinstance(ids, list)
        or not ids
        or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids)
        or isinstance(count, bool)
        or not isinstance(count, int)
        or not 1 <= count < len(ids)
    ):
        fail("grpo-corpus", "a completion's input_token_ids/prompt_token_count are invalid")
    completion = ids[count:]
    logprobs = [0.0] * len(completion)
    env_mask = [0] * len(completion)
    previous = count - 1
    actions = provenance.get("action_tokens")
    if not isinstance(actions, list) or not actions:
        fail("grpo-corpus", "a completion has no action_tokens")
    for action in actions:
        a = obj(
            action,
            "action token",
            {"sequence_index", "token_id", "source"},
            frozenset({"behavior_logprob"}),
        )
        index = uint(a["sequence_index"], "sequence_index")
        if not previous < index < len(ids) or a["token_id"] != ids[index]:
            fail("grpo-corpus", "action tokens must be increasing completion positions")
        previous = index
        if a["source"] == "sampled":
            lp = a.get("behavior_logprob")
            if (
                isinstance(lp, bool)
                or not isinstance(lp, int | float)
                or not math.isfinite(lp)
                or lp > 1e-6
            ):
                fail("grpo-corpus", "a sampled action token needs a finite behavior_logprob")
            logprobs[index - count] = float(lp)
            env_mask[index - count] = 1
        elif a["source"] != "forced" or a.get("behavior_logprob") is not None:
            fail("grpo-corpus", "action token source must be sampled, or forced without logprob")
    if not any(env_mask):
        fail("grpo-corpus", "a completion has no sampled action token")
    return {
        "prompt_ids": ids[:count],
        "completion_ids": completion,
        "logprobs": logprobs,
        "env_mask": env_mask,
        "sampled": sum(env_mask),
        "forced": sum(1 for x in actions if isinstance(x, dict) and x.get("source") == "forced"),
    }


class GroupCursor:
    """Reads the verified corpus snapshot group by group, re-verifying it at every epoch."""

    def __init__(self, work: str, ident: Identity) -> None:
        self.work = work
        self.ident = ident
        self.rows: Iterator[tuple[bytes, Json]] | None = None
        self.consumed = 0

    def next_group(self) -> Json:
        while True:
            if self.rows is None:
                verify_identity(self.work, self.ident)
                self.rows = iter_grpo_rows(self.work, self.ident.relative_path)
            try:
                return next(self.rows)[1]
            except StopIteration:
                self.rows = None


@dataclass
class GrpoCorpusStats:
    """What the recorded-GRPO route needs to know about the corpus snapshot."""

    dataset: Identity
    prompts: list[str]
    longest: int = 0
    completions: int = 0
    sampled: int = 0
    forced: int = 0
    policy: Json = None


def snapshot_grpo_corpus(bundle: Bundle, work: str) -> GrpoCorpusStats:
    """Step 1: copy the verified corpus into the private work directory (re-verified at
    every epoch) and count what it holds."""
    dataset_ident = Identity(
        "train.jsonl",
        bundle.manifest["data"]["dataset"]["size_bytes"],
        bundle.manifest["data"]["dataset"]["sha256"],
    )
    with os.fdopen(open_in_bundle(bundle.root, "train.jsonl"), "rb") as src:
        fd = os.open(os.path.join(work, "train.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, HASH_CHUNK)
            dst.flush()
            os.fsync(dst.fileno())
    verify_identity(work, dataset_ident)
    stats = GrpoCorpusStats(dataset_ident, [])
    for _row, group in iter_grpo_rows(work):
        stats.prompts.append(_prompt_text(group["messages"]))
        for completion in group["completions"]:
            record = completion_record(completion["provenance"])
            stats.longest = max(stats.longest, len(record["completion_ids"]))
            stats.completions += 1
            stats.sampled += record["sampled"]
            stats.forced += record["forced"]
            stats.policy = completion["provenance"].get("behavior_policy")
    if len(stats.prompts) != bundle.rows:
        fail("grpo-corpus", "the corpus snapshot changed while training started")
    return stats


def recorded_rollout(width: int, cursor: GroupCursor) -> Callable[[list[Any], Any], dict[str, Any]]:
    """Step 2: TRL's ``rollout_func``: the next recorded group for every block of
    ``width`` prompts, as recorded token ids, behaviour log-probs and env masks."""

    def rollout(batch: list[Any], trainer: Any) -> dict[str, Any]:
        if not batch or len(batch) % width:
            fail(
                "grpo-rollout", f"TRL asked for {len(batch)} completions, not a multiple of {width}"
            )
        out: dict[str, list[Any]] = {
            k: []
            for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "recorded_reward")
        }
        for start in range(0, len(batch), width):
            group = cursor.next_group()
            text_prompt = _prompt_text(group["messages"])
            if any(p != text_prompt for p in batch[start : start + width]):
                fail("grpo-rollout", "TRL's prompt order differs from the recorded corpus order")
            for completion in group["completions"]:
                record = completion_record(completion["provenance"])
                for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask"):
                    out[key].append(record[key])
                out["recorded_reward"].append(float(completion["reward"]))
            cursor.consumed += 1
        return out

    return rollout


@dataclass
class GrpoRun:
    """The built trainer and the facts its effective configuration records."""

    trainer: Any
    loaded: TrainableModel
    epsilon_high: str


def recorded_grpo_trainer_class() -> Any:
    """TRL's ``GRPOTrainer`` whose pi_old is the recorded behaviour log-probs."""
    from trl import GRPOTrainer  # type: ignore[attr-defined]

    class RecordedGRPOTrainer(GRPOTrainer):
        """The recorded behaviour log-probs, not a re-scoring, are pi_old of the ratio."""

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            out = super()._generate_and_score_completions(inputs)
            recorded = out.get("sampling_per_token_logps")
            if recorded is None:
                fail("grpo-rollout", "TRL dropped the recorded log-probs")
            out["old_per_token_logps"] = recorded.detach()
            return out

    return RecordedGRPOTrainer


def freeze_kl_reference(args: argparse.Namespace, bundle: Bundle, trainer: Any) -> None:
    """With an input adapter and beta > 0 the KL reference is TRL's "ref" copy of the
    initial adapter: it must exist and never move."""
    if bundle.has_input_adapter and float(args.beta) != 0:
        if "ref" not in trainer.model.peft_config:
            fail("grpo-kl", "TRL did not create the frozen initial-adapter KL reference")
        for name, param in trainer.model.named_parameters():
            if ".ref." in name:
                param.requires_grad_(False)  # the KL reference never moves


def build_grpo_trainer(
    args: argparse.Namespace, bundle: Bundle, work: str, stats: GrpoCorpusStats, cursor: GroupCursor
) -> GrpoRun:
    """Step 3: tokenizer (inference template), model, LoRA and TRL's ``GRPOTrainer`` whose
    pi_old is the recorded behaviour log-probs."""
    from datasets import Dataset
    from trl import GRPOConfig  # type: ignore[attr-defined]

    def recorded_reward(
        prompts: list[Any], completions: list[Any], recorded_reward: list[float], **_: Any
    ) -> list[float | None]:
        return list(recorded_reward)

    trainer_class = recorded_grpo_trainer_class()
    width = bundle.grpo_width
    tokenizer = load_tokenizer(args.base_model)
    tokenizer.chat_template = read_verified(
        bundle.root,
        manifest_identity(bundle, "model", "chat_template", "chat_template.jinja"),
        MAX_TEMPLATE_BYTES,
    ).decode("utf-8")
    ensure_pad_token(tokenizer)
    loaded = load_trainable_model(args, bundle)
    epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    config_kwargs = trainer_config_kwargs(args, work, loaded)
    config_kwargs.update(
        per_device_train_batch_size=width * args.batch_size,
        num_generations=width,
        max_completion_length=stats.longest,
        remove_unused_columns=False,
        steps_per_generation=1,
        num_iterations=1,
        use_vllm=False,
        beta=float(args.beta),
        epsilon=float(args.epsilon),
        epsilon_high=float(epsilon_high),
        loss_type=args.loss_type,
        importance_sampling_level=args.importance_sampling_level,
        scale_rewards=args.scale_rewards,
        mask_truncated_completions=False,
        use_bias_correction_kl=False,
        disable_dropout=True,
    )
    _adapt_config_fields(config_kwargs, GRPOConfig, loaded.checkpointing)
    trainer: Any = trainer_class(
        model=loaded.model,
        reward_funcs=[recorded_reward],
        args=GRPOConfig(**config_kwargs),
        train_dataset=Dataset.from_list([{"prompt": p} for p in stats.prompts]),
        processing_class=tokenizer,
        peft_config=loaded.peft_config,
        rollout_func=recorded_rollout(width, cursor),
    )
    freeze_kl_reference(args, bundle, trainer)
    return GrpoRun(trainer, loaded, epsilon_high)


def grpo_effective_config(
    args: argparse.Namespace, bundle: Bundle, stats: GrpoCorpusStats, run: GrpoRun
) -> dict[str, Json]:
    """Step 5: the tagged effective configuration of the result (§3.5)."""
    width = bundle.grpo_width
    beta = float(args.beta)
    reference = "initial_adapter" if bundle.has_input_adapter else "base_model"
    dtype = run.loaded.dtype
    config: dict[str, Json] = {
        "base_model": tagged("text", args.base_model),
        "behavior_policy": tagged("text", "recorded"),
        "behavior_policy_sha256": tagged("text", sha256_text(canonical_json(stats.policy))),
        "beta": tagged("decimal", args.beta),
        "bf16": tagged("boolean", dtype == "bfloat16"),
        "fp16": tagged("boolean", dtype == "float16"),
        "dataset_completions": tagged("unsigned", stats.completions),
        "dataset_forced_action_tokens": tagged("unsigned", stats.forced),
        "dataset_groups": tagged("unsigned", len(stats.prompts)),
        "dataset_sampled_action_tokens": tagged("unsigned", stats.sampled),
        "dtype": tagged("text", dtype),
        "epochs": tagged("decimal", args.epochs),
        "epsilon_high": tagged("decimal", run.epsilon_high),
        "epsilon_low": tagged("decimal", args.epsilon),
        "gradient_accumulation_steps": tagged("unsigned", args.gradient_accumulation_steps),
        "gradient_checkpointing": tagged("boolean", run.loaded.checkpointing),
        "groups_per_device_batch": tagged("unsigned", args.batch_size),
        "importance_sampling_level": tagged("text", args.importance_sampling_level),
        "input_adapter": tagged("boolean", bundle.has_input_adapter),
        "kl_estimator": tagged("text", "k3"),
        "kl_reference_policy": tagged("text", "none" if beta == 0 else reference),
        "learning_rate": tagged("decimal", args.learning_rate),
        "loss_type": tagged("text", args.loss_type),
        "lr_scheduler_type": tagged("text", args.lr_scheduler),
        "max_completion_length": tagged("unsigned", stats.longest),
        "max_grad_norm": tagged("decimal", args.max_grad_norm),
        "num_generations": tagged("unsigned", width),
        "num_iterations": tagged("unsigned", 1),
        "optimizer": tagged("text", "adamw_torch"),
        "per_device_train_batch_size": tagged("unsigned", width * args.batch_size),
        "platform_torch": tagged("boolean", bool(args.platform_torch)),
        "scale_rewards": tagged("text", args.scale_rewards),
        "seed": tagged("unsigned", args.seed),
        "shuffle_dataset": tagged("boolean", False),
        "steps_per_generation": tagged("unsigned", 1),
        "use_bias_correction_kl": tagged("boolean", False),
        "warmup_ratio": tagged("decimal", args.warmup_ratio),
        "weight_decay": tagged("decimal", args.weight_decay),
    }
    add_lora_entries(config, args, run.loaded.peft_config)
    return config


def train_grpo(args: argparse.Namespace, bundle: Bundle, work: str) -> tuple[str, dict[str, Json]]:
    """The recorded-GRPO route (§3.4): snapshot, rollout source, trainer, train, save."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    stats = snapshot_grpo_corpus(bundle, work)
    cursor = GroupCursor(work, stats.dataset)
    run = build_grpo_trainer(args, bundle, work, stats, cursor)
    run.trainer.train()
    if cursor.consumed == 0:
        fail("grpo-rollout", "training consumed no recorded group")
    adapter_dir = os.path.join(work, "adapter")
    if run.trainer.is_world_process_zero():
        # only the trained adapter; TRL's frozen "ref" copy is not an output
        save_adapter(run.trainer.model, adapter_dir, ["default"])
    return adapter_dir, grpo_effective_config(args, bundle, stats, run)


# ----------------------------------------------------------------------------------------
# result publication (§3.6)


def write_new(root: str, name: str, data: bytes) -> None:
    fd = os.open(
        os.path.join(root, name),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
        0o644,
    )
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_regular(path: str) -> bytes:
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        fail("adapter-output", f"{path} is not a regular file")
    with open(path, "rb") as f:
        return f.read()


def _finite_decimal(value: str) -> bool:
    if not value or value != value.strip() or len(value.encode("utf-8")) > MAX_TEXT_BYTES:
        return False
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


def check_effective_config(config: dict[str, Json]) -> None:
    if not 1 <= len(config) <= MAX_CONFIG_ENTRIES:
        fail("effective-config", "effective configuration must have 1..256 entries")
    for key, entry in config.items():
        text(key, "effective_config key")
        kind, value = entry["kind"], entry["value"]
        ok = {
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int)
            and not isinstance(value, bool)
            and -(2**63) <= value < 2**63,
            "unsigned": isinstance(value, int)
            and not isinstance(value, bool)
            and 0 <= value < 2**64,
            "decimal": isinstance(value, str) and _finite_decimal(value),
            "text": isinstance(value, str),
            "text_list": isinstance(value, list) and len(value) <= 256,
        }.get(kind, False)
        if not ok:
            fail("effective-config", f"effective_config[{key!r}] is not a valid {kind}")
    if len(canonical_json(config)) > MAX_CONFIG_BYTES:
        fail("effective-config", "effective configuration exceeds 64 KiB")


def result_document(
    bundle: Bundle, config: dict[str, Json], identities: dict[str, dict[str, Json]]
) -> dict[str, Json]:
    """``kiln_hf_result.json`` (§3.6) with its ``result_sha256`` self-digest: the trainer
    versions as installed, the executed script and the adapter files as written."""
    versions = {
        name: importlib.metadata.version(name) for name in ("torch", "transformers", "trl", "peft")
    }
    result: dict[str, Json] = {
        "schema_version": 1,
        "result_type": RESULT_TYPE,
        "export_sha256": bundle.export_sha256,
        "task": bundle.task,
        "trainer": {
            "kind": "trl_sft_trainer" if bundle.task == "sft" else "trl_grpo_trainer",
            "python_version": sys.version.split()[0],
            "torch_version": versions["torch"],
            "transformers_version": versions["transformers"],
            "trl_version": versions["trl"],
            "peft_version": versions["peft"],
            "script": identities[EXECUTED_SCRIPT],
        },
        "effective_config": config,
        "output_adapter": {
            "config": identities[ADAPTER_CONFIG],
            "model": identities[ADAPTER_MODEL],
        },
    }
    result["result_sha256"] = canonical_digest(result, "result_sha256")
    return result


def publish(
    bundle: Bundle, pre: Preflight, adapter_dir: str, config: dict[str, Json], platform_torch: bool
) -> str:
    """Write the result into the bundle root, the manifest last, behind the incomplete
    sentinel; on any failure remove what was written (§3.6)."""
    root = bundle.root
    check_effective_config(config)
    # the recovery rule once more, right before writing
    result_state(bundle, recover=False)
    written: list[str] = []
    try:
        write_new(root, INCOMPLETE_SENTINEL, INCOMPLETE_SENTINEL_TEXT)
        written.append(INCOMPLETE_SENTINEL)
        identities: dict[str, dict[str, Json]] = {}
        sources = [
            (EXECUTED_SCRIPT, pre.script),
            (ADAPTER_CONFIG, read_regular(os.path.join(adapter_dir, ADAPTER_CONFIG))),
            (ADAPTER_MODEL, read_regular(os.path.join(adapter_dir, ADAPTER_MODEL))),
        ]
        for name, data in sources:
            if not data:
                fail("adapter-output", f"{name} is empty")
            write_new(root, name, data)
            written.append(name)
            identities[name] = {
                "relative_path": name,
                "size_bytes": len(data),
                "sha256": sha256_text(data),
            }
        result = result_document(bundle, config, identities)
        text_out = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
        write_new(root, RESULT_MANIFEST, text_out.encode("utf-8"))
        written.append(RESULT_MANIFEST)
        os.unlink(os.path.join(root, INCOMPLETE_SENTINEL))
        fsync_dir(root)
    except BaseException:
        for name in reversed(written):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(root, name))
        raise
    _ = platform_torch
    return os.path.join(root, RESULT_MANIFEST)


if __name__ == "__main__":
    sys.exit(main())
