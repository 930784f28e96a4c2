"""Small shared pieces: the refusal error, strict JSON, digests and timestamps.

Kept apart so every other module can depend on it without import cycles.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any

#: Host ids and receipt ids become path components; this keeps them boring and portable.
SAFE_ID = re.compile(r"[a-z0-9][a-z0-9._-]{2,127}")
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
WORKLOAD_SCHEMA = SCHEMA_DIR / "workload-v1.schema.json"
RECEIPT_SCHEMA = SCHEMA_DIR / "receipt-v1.schema.json"


class Refusal(Exception):
    """A precondition failed before anything ran: nothing is written and the exit code is 2."""

    def __init__(self, rule: str, message: str, fix: str) -> None:
        super().__init__(f"[{rule}] {message}; fix: {fix}")
        self.rule = rule


def check_id(kind: str, value: str) -> str:
    if SAFE_ID.fullmatch(value) is None:
        raise Refusal(
            f"unsafe-{kind}",
            f"{kind} {value!r} does not match ^[a-z0-9][a-z0-9._-]{{2,127}}$",
            f"choose a {kind} of 3..128 lowercase letters, digits, '.', '_' or '-'",
        )
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def strict_json(data: bytes) -> Any:
    """JSON without duplicate keys or NaN/Infinity: two readers must never disagree on it."""
    return json.loads(
        data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant
    )


def canonical_bytes(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return "sha256:" + digest.hexdigest(), size


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def utc_text(moment: _dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
