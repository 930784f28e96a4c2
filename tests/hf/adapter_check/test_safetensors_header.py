"""The stdlib header reader agrees with the safetensors library on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln_verify.core.safetensors_header import read_safetensors_header

safetensors = pytest.importorskip("safetensors")
torch = pytest.importorskip("torch")

_TORCH_NAMES = {
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F64": "float64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}


def library_view(path: Path) -> tuple[dict[str, tuple[str, list[int]]], dict[str, str] | None]:
    from safetensors import safe_open

    out = {}
    with safe_open(str(path), "pt") as f:
        for key in f.keys():  # noqa: SIM118 (safe_open is not iterable)
            piece = f.get_slice(key)
            out[key] = (piece.get_dtype(), list(piece.get_shape()))
        return out, f.metadata()


def ours(path: Path) -> tuple[dict[str, tuple[str, list[int]]], dict[str, str] | None]:
    header = read_safetensors_header(path)
    tensors = {k: (t.dtype, list(t.shape)) for k, t in header.tensors.items()}
    return tensors, dict(header.metadata) if header.metadata is not None else None


def test_real_model_and_adapter(tiny_model: Path, peft_adapter: Path) -> None:
    for path in (tiny_model / "model.safetensors", peft_adapter / "adapter_model.safetensors"):
        assert ours(path) == library_view(path)
    assert len(read_safetensors_header(tiny_model / "model.safetensors").tensors) == 28


def test_every_torch_dtype_and_odd_shapes(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    tensors = {
        f"t_{code}": torch.zeros((3, 5), dtype=getattr(torch, name))
        for code, name in _TORCH_NAMES.items()
    }
    tensors["scalar"] = torch.tensor(1.5)
    tensors["empty"] = torch.zeros((0, 7))
    tensors["deep"] = torch.ones((1, 2, 1, 3, 1))
    path = tmp_path / "all.safetensors"
    save_file(tensors, str(path), metadata={"k": "v"})
    mine, meta = ours(path)
    assert (mine, meta) == library_view(path)
    assert {name: dtype for name, (dtype, _) in mine.items() if name.startswith("t_")} == {
        f"t_{code}": code for code in _TORCH_NAMES
    }
