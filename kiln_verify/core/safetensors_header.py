"""Strict, header-only reading of safetensors files (no weights are loaded).

The format is ``u64-LE N`` ‖ ``N`` bytes of UTF-8 JSON ‖ the data section. The header is
treated as hostile input and must be a complete, unambiguous index of the data section:

- ``8 <= 8 + N <= file size`` and ``N <= MAX_SAFETENSORS_HEADER_BYTES`` (else
  ``limit_exceeded``); the bytes are strict JSON (:mod:`kiln_verify.core.jsonio`: duplicate
  keys, non-finite numbers and invalid UTF-8 are refused with their ``json_*`` codes) and one
  object; trailing spaces (the writer's 8-byte padding) are allowed.
- ``__metadata__`` is optional and, when present, an object of string values.
- Every other key is a tensor name whose value has exactly the keys ``dtype``, ``shape`` and
  ``data_offsets``: a dtype from :data:`DTYPE_SIZES`, a list of non-negative integers, and
  ``[start, end]`` integers with ``start <= end``.
- ``end - start == prod(shape) * itemsize``; sorted by offset, the tensors tile the data
  section exactly: the first starts at 0, each starts where the previous ended (no gap, no
  overlap) and the last ends at the end of the file.

Every violation other than a limit or a JSON rule raises ``safetensors_invalid`` naming the
tensor and the rule. Only the standard library is used (``struct`` and our strict JSON).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import FileAccessError, LimitExceeded, SafetensorsInvalid, snippet
from kiln_verify.limits import MAX_SAFETENSORS_HEADER_BYTES

__all__ = [
    "DTYPE_SIZES",
    "FLOAT_DTYPES",
    "SafetensorsHeader",
    "TensorInfo",
    "parse_safetensors",
    "read_safetensors_header",
]

DTYPE_SIZES: Final[Mapping[str, int]] = MappingProxyType(
    {
        "BOOL": 1,
        "U8": 1,
        "I8": 1,
        "F8_E5M2": 1,
        "F8_E4M3": 1,
        "F8_E8M0": 1,
        "I16": 2,
        "U16": 2,
        "F16": 2,
        "BF16": 2,
        "I32": 4,
        "U32": 4,
        "F32": 4,
        "F64": 8,
        "I64": 8,
        "U64": 8,
        "C64": 8,
    }
)
"""Byte-aligned safetensors dtypes and their item sizes (sub-byte F4/F6 are refused)."""

FLOAT_DTYPES: Final = frozenset({"F16", "BF16", "F32"})
"""Dtypes a LoRA adapter's weights may have."""

_PREFIX = struct.Struct("<Q")
_TENSOR_KEYS: Final = frozenset({"dtype", "shape", "data_offsets"})


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor entry; ``start``/``end`` are offsets into the data section."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class SafetensorsHeader:
    """A validated header: tensors in header order, metadata, and the section sizes."""

    header_size: int
    data_size: int
    metadata: Mapping[str, str] | None
    tensors: Mapping[str, TensorInfo]


def _invalid(rule: str, path: str | None) -> SafetensorsInvalid:
    return SafetensorsInvalid(rule, path=path)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tensor(name: str, entry: Any, data_size: int, path: str | None) -> TensorInfo:
    shown = snippet(name)
    if not isinstance(entry, dict):
        raise _invalid(f"tensor {shown}: entry is not an object", path)
    if entry.keys() != _TENSOR_KEYS:
        extra = sorted(entry.keys() - _TENSOR_KEYS)
        missing = sorted(_TENSOR_KEYS - entry.keys())
        raise _invalid(
            f"tensor {shown}: keys must be exactly dtype, shape, data_offsets"
            f" (missing {snippet(','.join(missing))}, unexpected {snippet(','.join(extra))})",
            path,
        )
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
        raise _invalid(f"tensor {shown}: unknown dtype {snippet(dtype)}", path)
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise _invalid(f"tensor {shown}: shape must be a list of non-negative integers", path)
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise _invalid(
            f"tensor {shown}: data_offsets must be [start, end] with 0 <= start <= end", path
        )
    start, end = offsets
    if end > data_size:
        raise _invalid(
            f"tensor {shown}: data_offsets end {end} is beyond the data section"
            f" ({data_size} bytes)",
            path,
        )
    # Multiply with an early exit so a hostile shape cannot build a huge integer.
    elements = 0 if 0 in shape else 1
    for dim in shape if elements else ():
        elements *= dim
        if elements > data_size:
            break
    expected = elements * DTYPE_SIZES[dtype]
    if expected != end - start:
        raise _invalid(
            f"tensor {shown}: data_offsets span {end - start} bytes but shape {snippet(shape)}"
            f" of {dtype} needs {expected if elements <= data_size else 'more than the file'}",
            path,
        )
    return TensorInfo(name, dtype, tuple(shape), start, end)


def _check_tiling(tensors: list[TensorInfo], data_size: int, path: str | None) -> None:
    position, previous = 0, None
    for info in sorted(tensors, key=lambda t: (t.start, t.end)):
        if info.start != position:
            what = "overlaps" if info.start < position else "leaves a gap before"
            after = f" after tensor {snippet(previous)}" if previous is not None else ""
            raise _invalid(
                f"tensor {snippet(info.name)}: data_offsets start {info.start} {what} byte"
                f" {position}{after} (tensors must tile the data section)",
                path,
            )
        position, previous = info.end, info.name
    if position != data_size:
        raise _invalid(
            f"the tensors cover {position} bytes but the data section has {data_size}"
            " (trailing bytes are not allowed)",
            path,
        )


def _parse_header(
    raw: bytes, header_size: int, data_size: int, path: str | None
) -> SafetensorsHeader:
    document = loads_object(raw.rstrip(b" "), max_bytes=header_size, source=path)
    metadata: Mapping[str, str] | None = None
    tensors: list[TensorInfo] = []
    for name, entry in document.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise _invalid("__metadata__ must be an object of string values", path)
            metadata = MappingProxyType(dict(entry))
        else:
            tensors.append(_tensor(name, entry, data_size, path))
    _check_tiling(tensors, data_size, path)
    return SafetensorsHeader(
        header_size=header_size,
        data_size=data_size,
        metadata=metadata,
        tensors=MappingProxyType({t.name: t for t in tensors}),
    )


def _header_size(prefix: bytes, file_size: int, max_header_bytes: int, path: str | None) -> int:
    if len(prefix) < _PREFIX.size:
        raise _invalid(f"file has {file_size} bytes, fewer than the 8-byte length prefix", path)
    (size,) = _PREFIX.unpack(prefix)
    if size > max_header_bytes:
        raise LimitExceeded(
            "safetensors header length prefix",
            limit="MAX_SAFETENSORS_HEADER_BYTES",
            bound=max_header_bytes,
            observed=size,
            path=path,
        )
    if size > file_size - _PREFIX.size:
        raise _invalid(
            f"header length {size} exceeds the {file_size - _PREFIX.size} bytes after the prefix",
            path,
        )
    if size < 2:
        raise _invalid(f"header length {size} cannot hold a JSON object", path)
    return int(size)


def parse_safetensors(
    data: bytes, *, max_header_bytes: int = MAX_SAFETENSORS_HEADER_BYTES
) -> SafetensorsHeader:
    """Validate the header of a whole safetensors file held in memory."""
    size = _header_size(data[: _PREFIX.size], len(data), max_header_bytes, None)
    raw = data[_PREFIX.size : _PREFIX.size + size]
    return _parse_header(raw, size, len(data) - _PREFIX.size - size, None)


def read_safetensors_header(
    path: str | os.PathLike[str], *, max_header_bytes: int = MAX_SAFETENSORS_HEADER_BYTES
) -> SafetensorsHeader:
    """Validate a safetensors file's header, reading only its first ``8 + N`` bytes.

    The file must be a regular file (a symlink leaf is refused).
    """
    shown = os.fspath(path)
    with open_regular(path) as fd:
        try:
            file_size = os.fstat(fd).st_size
            prefix = os.pread(fd, _PREFIX.size, 0)
            size = _header_size(prefix, file_size, max_header_bytes, shown)
            chunks: list[bytes] = []
            got = 0
            while got < size:
                chunk = os.pread(fd, size - got, _PREFIX.size + got)
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        except OSError as exc:
            raise FileAccessError(f"cannot read: {exc.strerror}", path=shown) from None
    raw = b"".join(chunks)
    if len(raw) != size:
        raise _invalid(f"file shrank while reading its {size}-byte header", shown)
    return _parse_header(raw, size, file_size - _PREFIX.size - size, shown)
