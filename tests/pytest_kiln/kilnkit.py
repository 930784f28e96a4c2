"""Helpers for the ``kiln`` plugin tests.

The tests run the plugin with ``pytester.runpytest_inprocess``: each run gets a fresh
config and plugin manager, and a subprocess would add about 1.8 s of interpreter and plugin
start-up to every run (the folder took 99 s of CPU that way, 44 s in-process). Only a test
that asserts what a fresh interpreter has not imported still runs in a subprocess.
"""

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
