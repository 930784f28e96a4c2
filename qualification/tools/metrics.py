"""The one way a tool reports a metric to the qualification runner (a tagged stdout line)."""

from __future__ import annotations

import json
import sys

PREFIX = "KILN_QUALIFICATION_METRIC "


def emit(name: str, value: str | int | float | bool | None, unit: str | None = None) -> None:
    item: dict[str, object] = {"name": name, "value": value}
    if unit is not None:
        item["unit"] = unit
    print(PREFIX + json.dumps(item, sort_keys=True), flush=True)


def fail(message: str) -> int:
    print(f"qualification tool: {message}", file=sys.stderr, flush=True)
    return 1
