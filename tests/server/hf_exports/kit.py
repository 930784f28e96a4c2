"""Checks the export tests share: Kiln's records, the registry's cleanliness."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx

from tests.openenv.records.kiln_published import differences

SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def kiln(record: str, value: Any) -> Any:
    """``value`` is Kiln's ``record`` (field lists, and the values its $defs constrain)."""
    assert differences(record, value) == [], differences(record, value)
    summaries: list[dict[str, Any]] = []
    if record == "ExportSummary":
        summaries = [value]
    elif record == "ExportList":
        summaries = value["data"]
    elif record == "ExportDetail":
        summaries = [value["summary"]]
    for summary in summaries:
        assert NAME.fullmatch(summary["name"])
        assert summary["task"] in ("sft", "grpo")
        assert SHA256.fullmatch(summary["export_sha256"])
        assert SHA256.fullmatch(summary["ordered_corpus_sha256"])
        assert isinstance(summary["row_count"], int)
        assert summary["row_count"] >= 1
        assert summary["source_name"]
        assert summary["bundle_filename"] == f"{summary['name']}.kiln-hf"
        assert summary["download_url"] == f"/v1/train/hf/exports/{summary['name']}/download"
    if record == "DeleteExportResponse":
        assert value["status"] == "deleted"
        assert NAME.fullmatch(value["name"])
    return value


def code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    found: str = body["error"]["code"]
    return found


def entries(root: Path) -> list[str]:
    """What the registry directory holds (nothing but published exports when clean)."""
    return sorted(os.listdir(root)) if root.exists() else []


def created(response: httpx.Response) -> dict[str, Any]:
    """A 201 create answer: Kiln's ExportSummary with its strong ETag and no-store."""
    assert response.status_code == 201, response.text
    summary: dict[str, Any] = kiln("ExportSummary", response.json())
    assert response.headers["etag"] == f'"{summary["export_sha256"]}"'
    assert response.headers["cache-control"] == "private, no-store"
    return summary
