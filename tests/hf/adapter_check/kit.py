"""Write safetensors files and adapter directories byte by byte (no torch needed)."""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path
from typing import Any

from kiln_verify.core.safetensors_header import DTYPE_SIZES

Tensors = dict[str, tuple[str, list[int]]]


def safetensors_bytes(
    tensors: Tensors, metadata: dict[str, str] | None = None, *, pad: bool = True
) -> bytes:
    """A well-formed file: tensors in the given order, zero-filled data."""
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * DTYPE_SIZES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    return raw_file(header, bytes(offset), pad=pad)


def raw_file(header: dict[str, Any] | bytes, data: bytes, *, pad: bool = True) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """The adapter's header as a dict and its data-section size."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + size]), len(raw) - 8 - size


def rewrite_adapter(source: Path, target: Path, tensors: Tensors) -> Path:
    """Copy an adapter directory and replace its weights by zero tensors of these shapes."""
    shutil.copytree(source, target)
    (target / "adapter_model.safetensors").write_bytes(safetensors_bytes(tensors, {"format": "pt"}))
    return target


def tensors_of(path: Path) -> Tensors:
    header, _ = read_header(path)
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"]) for k, v in header.items()}


def edit_config(adapter: Path, **changes: Any) -> None:
    path = adapter / "adapter_config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is _DELETE:
            del config[key]
        else:
            config[key] = value
    path.write_text(json.dumps(config))


_DELETE = object()
DELETE: Any = _DELETE
