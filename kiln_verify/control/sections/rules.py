"""The checks every configuration section shares: tables, known keys, bounded integers.

Each refusal is a :class:`~kiln_verify.errors.UsageError` (exit status 2) whose rule names
the section and key (``[openenv].max_active_runs must be ...``) and, where one exists,
the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kiln_verify.errors import UsageError

__all__ = ["boolean", "fail", "integer", "known_keys", "table"]


def fail(rule: str, path: str | None, hint: str | None = None) -> UsageError:
    return UsageError(f"server configuration: {rule}", path=path, hint=hint)


def table(value: Any, where: str, path: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(f"{where} must be a table", path)
    return value


def known_keys(values: Mapping[str, Any], allowed: set[str], where: str, path: str | None) -> None:
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise fail(
            f"{where} has unknown key(s) {', '.join(repr(k[:64]) for k in unknown)}",
            path,
            hint=f"allowed: {', '.join(sorted(allowed))}",
        )


def integer(
    values: Mapping[str, Any],
    key: str,
    default: int,
    low: int,
    high: int,
    where: str,
    path: str | None,
) -> int:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(f"{where}.{key} must be an integer in {low}..{high}", path)
    return value


def boolean(
    values: Mapping[str, Any], key: str, default: bool, where: str, path: str | None
) -> bool:
    value = values.get(key, default)
    if not isinstance(value, bool):
        raise fail(f"{where}.{key} must be true or false", path)
    return value
