"""Helpers shared by the OpenEnv client tests (imported as tests.openenv.protocol.oekit)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from oracle.runner import ServerHandle

T = TypeVar("T")
Start = Callable[..., ServerHandle]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop (tests stay synchronous)."""
    return asyncio.run(coro)


def canonical_sha256(value: Any) -> str:
    """Independent re-implementation of the §4 canonical digest for cross-checking."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
