"""HF bundle verification and the runner's preflight versus ``sha256sum`` over the same files.

Builds a synthetic resident model of ``--size-mib`` MiB (default 1024: a tiny real
tokenizer, config and chat template next to ``--shards`` safetensors shards whose valid
headers describe one BF16 tensor of pseudo-random bytes), optionally an input adapter of
``--adapter-mib`` MiB (default a quarter of the model), exports an SFT bundle from them with
:func:`kiln_verify.hf.export.export_sft`, and then times, interleaved in each of
``--rounds`` rounds after one warm-up round (warm page cache):

* ``verify_lib``: :func:`kiln_verify.hf.verify.verify_hf_path` on the bundle directory,
  in this process (imports paid once, during the warm-up);
* ``verify_cli``: ``kiln-verify hf verify BUNDLE --json`` as a subprocess (interpreter
  start-up and imports included);
* ``train_py``: ``python -I train.py BUNDLE --base-model MODEL --verify-only`` run from
  inside the bundle (the standalone runner's stdlib preflight, start-up included);
* ``resident``: :meth:`ModelSnapshot.read` on the model directory, the resident identity
  that ``hf export-*`` and ``hf import-peft`` compute (in this process);
* ``sha256sum`` and in-process ``hashlib.file_digest`` over exactly the files each of those
  reads: every bundle file for ``verify_*``; every bundle file, every shard and the model's
  ``tokenizer.json`` for ``train_py``; the shards, ``config.json``, ``tokenizer.json`` and
  ``chat_template.jinja`` for ``resident``.

Ratios divide medians measured in the same run. A pristine bundle does not contain the
base weights (it records their identities), so ``hf verify`` reads the model's bytes only
through the input adapter it carries; ``train.py --verify-only`` and the resident identity
read every shard. Everything lives in one temporary directory (``--tmpdir``) that is
removed at the end.

    python -m benchmarks.hf_verify --json                 # 1 GiB model, 256 MiB adapter
    python -m benchmarks.hf_verify --size-mib 8 --rounds 1 --json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MiB = 2**20
_BLOCK = MiB
_ROW_BYTES = 2048  # one BF16 row of 1024 columns

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
CONFIG = {
    "architectures": ["Qwen3_5ForCausalLM"],
    "model_type": "qwen3_5_text",
    "vocab_size": 384,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "dtype": "bfloat16",
}
ROWS = [
    {
        "messages": [
            {"role": "user", "content": "two plus two"},
            {"role": "assistant", "content": "the answer is four"},
        ]
    },
    {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "the arm"},
            {"role": "assistant", "content": "pull the arm"},
        ]
    },
]
_CLI = "from kiln_verify.cli import main; main()"


def tokenizer_json() -> bytes:
    """The tiny model's byte-level BPE tokenizer, trained on this benchmark's own words."""
    from kiln_verify.testing.tiny_model import train_tokenizer

    words = ["arm", "pull", "the", "answer", "is", "four", "two", "plus", "be", "brief"]
    lines = [f"{words[i % 10]} {words[(i * 7) % 10]} {words[(i * 3) % 10]}" for i in range(300)]
    return str(train_tokenizer(lines).to_str()).encode("utf-8")


def write_safetensors(path: Path, payload_bytes: int, block: bytes, name: str) -> None:
    """One tensor ``name`` of BF16 ``[rows, 1024]`` filled by repeating ``block``; the header
    is valid safetensors (u64-LE length, JSON padded with spaces to 8 bytes)."""
    if payload_bytes <= 0 or payload_bytes % _ROW_BYTES:
        raise ValueError(f"payload must be a positive multiple of {_ROW_BYTES} bytes")
    header = {
        "__metadata__": {"format": "pt"},
        name: {
            "dtype": "BF16",
            "shape": [payload_bytes // _ROW_BYTES, _ROW_BYTES // 2],
            "data_offsets": [0, payload_bytes],
        },
    }
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("xb") as stream:
        stream.write(struct.pack("<Q", len(encoded)) + encoded)
        left = payload_bytes
        while left:
            chunk = block if left >= len(block) else block[:left]
            stream.write(chunk)
            left -= len(chunk)


def _split_mib(total_mib: int, parts: int) -> list[int]:
    base, extra = divmod(total_mib, parts)
    return [base + (1 if index < extra else 0) for index in range(parts)]


def build_model(directory: Path, size_mib: int, shards: int, block: bytes) -> Path:
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    (directory / "tokenizer.json").write_bytes(tokenizer_json())
    (directory / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    sizes = [mib for mib in _split_mib(size_mib, shards) if mib]
    for index, mib in enumerate(sizes, start=1):
        name = f"model-{index:05d}-of-{len(sizes):05d}.safetensors"
        write_safetensors(directory / name, mib * MiB, block, f"model.layers.{index}.weight")
    return directory


def build_adapter(directory: Path, size_mib: int, block: bytes) -> Path:
    directory.mkdir()
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": 8,
        "lora_alpha": 16,
        "target_modules": ["q_proj", "v_proj"],
    }
    (directory / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(
        directory / "adapter_model.safetensors", size_mib * MiB, block, "base_model.lora_A.weight"
    )
    return directory


def files_beneath(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


def sha256sum(files: Sequence[Path]) -> None:
    subprocess.run(
        ["sha256sum", *map(str, files)], check=True, stdout=subprocess.DEVNULL, cwd=REPO_ROOT
    )


def hashlib_files(files: Sequence[Path]) -> None:
    for path in files:
        with path.open("rb") as stream:
            hashlib.file_digest(stream, "sha256")


def _child(argv: Sequence[str], cwd: Path) -> None:
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    status = json.loads(proc.stdout)
    if status.get("status") != "verified":
        raise RuntimeError(f"{argv[:4]} did not verify: {proc.stdout[-2000:]}")


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _summary(samples: list[float]) -> dict[str, float]:
    return {"min_s": round(min(samples), 4), "median_s": round(statistics.median(samples), 4)}


def _set(files: Sequence[Path]) -> dict[str, int]:
    return {"files": len(files), "bytes": sum(path.stat().st_size for path in files)}


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from kiln_verify.hf.export import ModelSnapshot, export_sft
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.verify import verify_hf_path

    block = os.urandom(_BLOCK)
    start = time.perf_counter()
    model = build_model(tmp / "model", args.size_mib, args.shards, block)
    adapter = None
    if args.adapter_mib:
        adapter = build_adapter(tmp / "bench-adapter", args.adapter_mib, block)
    build_s = time.perf_counter() - start
    dataset = tmp / "messages.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    start = time.perf_counter()
    outcome = export_sft(
        ExportSource(model=model, input_adapter=adapter),
        dataset=dataset,
        name="bench",
        output=tmp / "bench.kiln-hf.tar.gz",
    )
    export_s = time.perf_counter() - start
    outcome.archive.unlink()  # only the directory is measured; free the disk early
    bundle = outcome.directory
    bundle_files = files_beneath(bundle)
    shard_files = sorted(model.glob("*.safetensors"))
    train_files = [*bundle_files, *shard_files, model / "tokenizer.json"]
    resident_files = [
        model / "config.json",
        model / "tokenizer.json",
        model / "chat_template.jinja",
        *shard_files,
    ]
    verify_cli = [sys.executable, "-c", _CLI, "hf", "verify", str(bundle), "--json"]
    train_py = [
        sys.executable,
        "-I",
        "train.py",
        str(bundle),
        "--base-model",
        str(model),
        "--verify-only",
    ]
    actions: dict[str, Callable[[], object]] = {
        "sha256sum_bundle": lambda: sha256sum(bundle_files),
        "hashlib_bundle": lambda: hashlib_files(bundle_files),
        "verify_lib": lambda: verify_hf_path(bundle),
        "verify_cli": lambda: _child(verify_cli, REPO_ROOT),
        "sha256sum_train": lambda: sha256sum(train_files),
        "hashlib_train": lambda: hashlib_files(train_files),
        "train_py": lambda: _child(train_py, bundle),
        "sha256sum_resident": lambda: sha256sum(resident_files),
        "hashlib_resident": lambda: hashlib_files(resident_files),
        "resident": lambda: ModelSnapshot.read(model),
    }
    samples: dict[str, list[float]] = {name: [] for name in actions}
    for round_index in range(args.rounds + 1):  # round 0 warms the page cache and imports
        for name, action in actions.items():
            elapsed = _timed(action)
            if round_index:
                samples[name].append(elapsed)
    timings = {name: _summary(values) for name, values in samples.items()}

    def ratio(ours: str, base: str) -> float:
        return round(timings[ours]["median_s"] / timings[base]["median_s"], 2)

    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "size_mib": args.size_mib,
        "adapter_mib": args.adapter_mib,
        "shards": len(shard_files),
        "rounds": args.rounds,
        "build_s": round(build_s, 2),
        "export_s": round(export_s, 2),
        "sets": {
            "bundle": _set(bundle_files),
            "train": _set(train_files),
            "resident": _set(resident_files),
        },
        "timings": timings,
        # interpreter start-up and imports of the CLI: the fixed part of `hf verify`
        "verify_cli_overhead_s": round(
            timings["verify_cli"]["median_s"] - timings["verify_lib"]["median_s"], 4
        ),
        "ratios": {
            "verify_lib_vs_sha256sum": ratio("verify_lib", "sha256sum_bundle"),
            "verify_cli_vs_sha256sum": ratio("verify_cli", "sha256sum_bundle"),
            "train_py_vs_sha256sum": ratio("train_py", "sha256sum_train"),
            "resident_vs_sha256sum": ratio("resident", "sha256sum_resident"),
            "verify_lib_vs_hashlib": ratio("verify_lib", "hashlib_bundle"),
            "train_py_vs_hashlib": ratio("train_py", "hashlib_train"),
            "resident_vs_hashlib": ratio("resident", "hashlib_resident"),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="total shard payload (MiB)")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument(
        "--adapter-mib", type=int, default=None, help="input adapter payload (default size/4)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tmpdir", type=Path, default=None, help="where the scratch dir goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.size_mib < 1 or args.shards < 1 or args.rounds < 1:
        parser.error("--size-mib, --shards and --rounds must be positive")
    if args.adapter_mib is None:
        args.adapter_mib = args.size_mib // 4
    if args.adapter_mib < 0:
        parser.error("--adapter-mib must not be negative")
    with tempfile.TemporaryDirectory(prefix="kiln-hf-verify-bench-", dir=args.tmpdir) as tmp:
        results = run(args, Path(tmp))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
