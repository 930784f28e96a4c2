"""Helpers for the ``kiln`` plugin tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFORMANCE = ("--pyargs", "pytest_kiln.conformance")


def load_report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def verdicts(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(row["endpoint"], row["case"]): row["verdict"] for row in report["results"]}
