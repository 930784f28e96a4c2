"""Shared helpers of the interop suite: the skip marker and small protocol assertions."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from kiln_verify.openenv.protocol.wire import Reward

T = TypeVar("T")

COUNTER_VARIABLE = "KILN_OPENENV_INTEROP_COUNTER_URL"

requires_gate = pytest.mark.skipif(
    not os.environ.get(COUNTER_VARIABLE),
    reason=f"{COUNTER_VARIABLE} is not set: run scripts/check_miniopenenv_interop.sh",
)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one scenario on a fresh event loop."""
    return asyncio.run(coro)


def tagged(reward: Reward) -> tuple[str, object]:
    """A reward as ``(kind, value)``: ``("integer", 1)`` differs from ``("float", 1.0)``."""
    return (reward.kind, reward.value)


def action_fields(schema: dict[str, Any]) -> dict[str, Any]:
    """The action schema's properties without the optional ``metadata`` property."""
    properties = schema["action"].get("properties", {})
    assert isinstance(properties, dict)
    return {name: spec for name, spec in properties.items() if name != "metadata"}
