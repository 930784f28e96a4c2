"""A completed HF/TRL bundle whose adapter is as large as asked, for the transfer benchmarks.

Training a 1 GiB LoRA adapter for real would cost minutes of CPU and gigabytes of optimizer
state; the transfers under test never look at the weights' values. So a real completed
bundle (the tiny model, one ``train.py`` step) is copied and its adapter replaced by one of
the same modules and layers at a large rank: ``adapter_config.json`` says the new ``r``,
``adapter_model.safetensors`` holds float32 tensors of exactly the shapes the resident model
needs at that rank (pseudo-random bytes, so gzip cannot shrink them, like real weights), and
the result manifest is re-sealed over the new files (``lora_rank`` in its effective
configuration included). The copy passes ``hf verify --completed`` and the server's import,
whose adapter check reads only the safetensors header against the model's ``config.json``:
nothing ever loads these weights into the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from pathlib import Path

from kiln_verify.core.safetensors_header import read_safetensors_header
from kiln_verify.hf.manifest import FileIdentity, document_bytes, read_result
from kiln_verify.hf.manifest.result import config_value
from kiln_verify.hf.verify import verify_hf_bundle
from kiln_verify.limits import MAX_LORA_RANK

__all__ = ["enlarge_bundle"]

_F32 = 4
_BLOCK = 1 << 20


def _identity(path: Path, relative: str) -> FileIdentity:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_BLOCK):
            digest.update(chunk)
    return FileIdentity(
        relative_path=relative,
        size_bytes=path.stat().st_size,
        sha256="sha256:" + digest.hexdigest(),
    )


def _write_weights(path: Path, shapes: dict[str, tuple[int, int]]) -> None:
    """Valid safetensors: the u64-LE header length, the JSON header padded with spaces to 8
    bytes, then every tensor's float32 payload in header order."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (rows, cols) in sorted(shapes.items()):
        size = rows * cols * _F32
        header[name] = {
            "dtype": "F32",
            "shape": [rows, cols],
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    block = os.urandom(_BLOCK)
    with path.open("xb") as stream:
        stream.write(struct.pack("<Q", len(encoded)) + encoded)
        left = offset
        while left:
            chunk = block if left >= len(block) else block[:left]
            stream.write(chunk)
            left -= len(chunk)


def enlarge_bundle(completed: Path, target: Path, weights_bytes: int) -> tuple[Path, int, int]:
    """Copy ``completed`` to ``target`` (a new ``NAME.kiln-hf``) with an adapter of at most
    ``weights_bytes`` of tensors (the largest rank that fits, at most ``MAX_LORA_RANK``);
    returns (bundle, rank, adapter file size)."""
    shutil.copytree(completed, target)
    weights = target / "adapter_model.safetensors"
    old = read_safetensors_header(weights)
    config = json.loads((target / "adapter_config.json").read_text())
    rank = int(config["r"])
    per_rank = 0  # float32 elements per unit of rank: in_features of each A, out of each B
    for name, info in old.tensors.items():
        rows, cols = info.shape
        per_rank += cols if ".lora_A." in name else rows
    new_rank = max(1, min(MAX_LORA_RANK, weights_bytes // (per_rank * _F32)))
    shapes = {}
    for name, info in old.tensors.items():
        rows, cols = info.shape
        shapes[name] = (new_rank, cols) if ".lora_A." in name else (rows, new_rank)
        assert (rows if ".lora_A." in name else cols) == rank
    weights.unlink()
    _write_weights(weights, shapes)
    config["r"] = new_rank
    config_path = target / "adapter_config.json"
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    result_path = target / "kiln_hf_result.json"
    result = read_result(result_path.read_bytes())
    effective = dict(result.effective_config)
    if "lora_rank" in effective:
        effective["lora_rank"] = config_value(new_rank)
    adapter = result.output_adapter.model_copy(
        update={
            "config": _identity(config_path, "adapter_config.json"),
            "model": _identity(weights, "adapter_model.safetensors"),
        }
    )
    resealed = result.model_copy(update={"output_adapter": adapter, "effective_config": effective})
    result_path.write_bytes(document_bytes(resealed.sealed()))
    verify_hf_bundle(target, completed=True)
    return target, new_rank, weights.stat().st_size
