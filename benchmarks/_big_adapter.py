"""A completed HF/TRL bundle whose adapter is as large as asked, for the transfer benchmarks.

Training a 1 GiB LoRA adapter for real would cost minutes of CPU and gigabytes of optimizer
state; the transfers under test never look at the weights' values. So a real completed
bundle (a small model, one ``train.py`` step) is copied and its adapter replaced by one on
every projection of every layer the model has (``resident_modules`` of the bundle's model
configuration) at the largest rank that fits the size asked: ``adapter_config.json`` says
the new ``r`` and targets, ``adapter_model.safetensors`` holds float32 tensors of exactly
the shapes the model needs (pseudo-random bytes, so gzip cannot shrink them, like real
weights), and the result manifest is re-sealed over the new files (``lora_rank`` and
``target_modules`` of its effective configuration included). The copy passes ``hf verify
--completed`` and the server's import, whose adapter check reads only the safetensors header
against the model's ``config.json``: nothing ever loads these weights into the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from pathlib import Path

from kiln_verify.hf.adapter_check import _FAMILY, resident_modules
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


def lora_shapes(model_config: Path, rank: int) -> dict[str, tuple[int, int]]:
    """Every supported projection of every layer: PEFT's tensor names and shapes at ``rank``."""
    modules = resident_modules(json.loads(model_config.read_text()))
    shapes: dict[str, tuple[int, int]] = {}
    for layer, projections in enumerate(modules.layers):
        for module, (features_in, features_out) in projections.items():
            stem = f"base_model.model.model.layers.{layer}.{_FAMILY[module]}.{module}"
            shapes[f"{stem}.lora_A.weight"] = (rank, features_in)
            shapes[f"{stem}.lora_B.weight"] = (features_out, rank)
    return shapes


def enlarge_bundle(completed: Path, target: Path, weights_bytes: int) -> tuple[Path, int, int]:
    """Copy ``completed`` to ``target`` (a new ``NAME.kiln-hf``) with an adapter of at most
    ``weights_bytes`` of tensors (the largest rank that fits, at most ``MAX_LORA_RANK``);
    returns (bundle, rank, adapter file size)."""
    shutil.copytree(completed, target)
    model_config = target / "kiln_model_config.json"
    per_rank = sum(rows * cols for rows, cols in lora_shapes(model_config, 1).values())
    rank = max(1, min(MAX_LORA_RANK, weights_bytes // (per_rank * _F32)))
    shapes = lora_shapes(model_config, rank)
    targets = sorted({name.split(".")[-3] for name in shapes})
    weights = target / "adapter_model.safetensors"
    weights.unlink()
    _write_weights(weights, shapes)
    config_path = target / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config.update(r=rank, target_modules=targets)
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    result_path = target / "kiln_hf_result.json"
    result = read_result(result_path.read_bytes())
    effective = dict(result.effective_config)
    if "lora_rank" in effective:
        effective["lora_rank"] = config_value(rank)
    if "target_modules" in effective:
        effective["target_modules"] = config_value(",".join(targets))
    adapter = result.output_adapter.model_copy(
        update={
            "config": _identity(config_path, "adapter_config.json"),
            "model": _identity(weights, "adapter_model.safetensors"),
        }
    )
    resealed = result.model_copy(update={"output_adapter": adapter, "effective_config": effective})
    result_path.write_bytes(document_bytes(resealed.sealed()))
    verify_hf_bundle(target, completed=True)
    return target, rank, weights.stat().st_size
