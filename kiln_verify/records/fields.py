"""The field types every contract record is built from (kiln-openenv-contract §2.1).

Numbers are strict (no ``"1"`` for ``1``, no ``true`` for ``1``, no ``1`` for ``1.0``) and
floats are finite and compared bit-exactly; digests are spelled ``sha256:<64 hex>``;
identity texts follow Kiln's trimmed, bounded, control-free rule; free-form JSON values
(observations, reset payloads, state, JSON Schemas) are kept as parsed and written with
object keys sorted recursively (docs/contract.md). Both the OpenEnv records and the HF/TRL
manifests use these, so a number or a digest is read the same way in either contract.
"""

from __future__ import annotations

import math
import operator
import re
import struct
from typing import Annotated, Any, Final

from pydantic import (
    Field,
    PlainSerializer,
    PlainValidator,
    StrictInt,
    StrictStr,
    WithJsonSchema,
)

from kiln_verify.limits import MAX_RECORD_TEXT_BYTES

__all__ = [
    "F64",
    "I64_MAX",
    "SHA256_PATTERN",
    "U64",
    "FreeJson",
    "FreeObject",
    "IdentityText",
    "NonNegF64",
    "Seed",
    "Sha256",
    "bits_equal",
    "sort_keys",
]

I64_MAX: Final = 2**63 - 1
SHA256_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"

# --- free-form JSON ------------------------------------------------------------------------


def sort_keys(value: Any) -> Any:
    """A copy of ``value`` with every object's keys sorted by code point, at every depth.

    This is how serde_json without ``preserve_order`` writes a ``Value`` (a ``BTreeMap``),
    and therefore how every free-form value in our records is written (docs/contract.md).
    """
    if isinstance(value, dict):
        # scalars are copied inline: one call per container, not one per value
        return {
            key: sort_keys(item) if isinstance(item, dict | list) else item
            for key, item in sorted(value.items(), key=_first)
        }
    if isinstance(value, list):
        return [sort_keys(item) if isinstance(item, dict | list) else item for item in value]
    return value


_first = operator.itemgetter(0)


def _any_json(value: Any) -> Any:
    return value


FreeJson = Annotated[
    Any,
    PlainValidator(_any_json),
    PlainSerializer(sort_keys),
    WithJsonSchema({}),
]
"""Any JSON value, kept as parsed; written with object keys sorted recursively."""


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


FreeObject = Annotated[
    dict[str, Any],
    PlainValidator(_object),
    PlainSerializer(sort_keys),
    WithJsonSchema({"type": "object"}),
]
"""A JSON object with free-form content (reset payloads, actions); keys written sorted."""


# --- scalars -------------------------------------------------------------------------------


def _strict_float(value: Any) -> float:
    if type(value) is not float:
        raise ValueError("must be a JSON float spelled with '.' or an exponent, not an integer")
    if not math.isfinite(value):
        raise ValueError("must be finite")
    return value


F64 = Annotated[
    float,
    PlainValidator(_strict_float),
    WithJsonSchema({"type": "number"}),
]
"""A finite f64 compared bit-exactly; JSON integers are refused (docs/contract.md)."""


def _non_negative_float(value: Any) -> float:
    result = _strict_float(value)
    if result < 0 or math.copysign(1.0, result) < 0:
        raise ValueError("must be a non-negative float")
    return result


NonNegF64 = Annotated[
    float,
    PlainValidator(_non_negative_float),
    WithJsonSchema({"type": "number", "minimum": 0}),
]
"""A finite, non-negative f64 (``-0.0`` is refused: Kiln never measures one)."""

U64 = Annotated[StrictInt, Field(ge=0, le=2**64 - 1)]
"""A non-negative integer (Rust ``u64``/``usize``)."""

Seed = Annotated[StrictInt, Field(ge=0, le=I64_MAX)]
"""An episode seed: 0..=i64::MAX."""

Sha256 = Annotated[StrictStr, Field(pattern=SHA256_PATTERN)]
"""A digest spelled ``sha256:<64 lower-case hex>`` (:class:`Sha256Digest` parses it)."""


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""Exactly the characters of Unicode category ``Cc`` (control)."""


_IDENTITY_OK: dict[str, None] = {}
"""Identity texts already accepted (names and URLs repeat on every record); bounded."""
_IDENTITY_OK_MAX: Final = 1024


def _identity_text(value: Any) -> str:
    if type(value) is str and value in _IDENTITY_OK:
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if not value or value != value.strip():
        raise ValueError("must be non-empty and carry no surrounding whitespace")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_RECORD_TEXT_BYTES:
        raise ValueError(f"is longer than MAX_RECORD_TEXT_BYTES = {MAX_RECORD_TEXT_BYTES}")
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    if type(value) is str:
        if len(_IDENTITY_OK) >= _IDENTITY_OK_MAX:
            _IDENTITY_OK.clear()
        _IDENTITY_OK[value] = None
    return value


IdentityText = Annotated[
    str,
    PlainValidator(_identity_text),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_RECORD_TEXT_BYTES}),
]
"""1..256 UTF-8 bytes, trimmed, no control characters (Kiln's identity-text rule)."""


def bits_equal(left: float, right: float) -> bool:
    """Bit-exact f64 equality (``0.0`` and ``-0.0`` differ), as Kiln's verifier compares."""
    if type(left) is float and type(right) is float:
        # Equal non-zero floats have equal bits; zeros differ by sign only; unequal floats
        # differ unless both are NaN (whose payload bits decide below).
        if left == right:
            return left != 0.0 or math.copysign(1.0, left) == math.copysign(1.0, right)
        if left == left or right == right:  # at most one of them is NaN
            return False
    return struct.pack("<d", left) == struct.pack("<d", right)
