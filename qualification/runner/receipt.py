"""Receipts: the self-digest, semantic rules, no-clobber writing and ``--check``.

``receipt_sha256`` is ``sha256`` of the canonical JSON (sorted keys, compact, UTF-8) of the
receipt without that one field, so any edit to a committed receipt is detectable offline.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import jsonschema

from .common import RECEIPT_SCHEMA, canonical_bytes, sha256_bytes, sha256_file, strict_json
from .gitstate import committed_bytes, has_commit, tree_hash
from .workload import load_schema


class ReceiptInvalid(Exception):
    """A receipt breaks the schema or a semantic rule."""


def self_digest(receipt: dict[str, Any]) -> str:
    return sha256_bytes(
        canonical_bytes({k: v for k, v in receipt.items() if k != "receipt_sha256"})
    )


def seal(receipt: dict[str, Any]) -> dict[str, Any]:
    sealed = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
    sealed["receipt_sha256"] = self_digest(sealed)
    return sealed


def validate(receipt: Any) -> None:
    """Schema, then the rules a schema cannot state; raises ReceiptInvalid."""
    try:
        jsonschema.validate(receipt, load_schema(RECEIPT_SCHEMA))
    except jsonschema.ValidationError as error:
        where = "/".join(str(part) for part in error.absolute_path)
        raise ReceiptInvalid(f"schema: at /{where}: {error.message[:300]}") from None
    if receipt["receipt_sha256"] != self_digest(receipt):
        raise ReceiptInvalid("receipt_sha256 does not match the receipt's content")
    started = _time(receipt["started_at_utc"])
    if _time(receipt["finished_at_utc"]) < started:
        raise ReceiptInvalid("finished_at_utc is before started_at_utc")
    ok_steps = all(step["status"] in ("passed", "skipped") for step in receipt["steps"])
    ok_evidence = all(item["passed"] for item in receipt["evidence"])
    source = receipt["source"]
    ok_source = source["clean_at_end"] and source["commit_at_end"] == source["git_commit"]
    ok_model = receipt["model"] is None or receipt["model"]["unchanged"] is not False
    passing = receipt["verdict"] == "pass"
    if passing != (not receipt["failures"]):
        raise ReceiptInvalid("verdict pass requires no failures, and fail at least one")
    if passing and not (ok_steps and ok_evidence and ok_source and ok_model):
        raise ReceiptInvalid("verdict pass with a failed step, evidence, tree or model check")
    ids = [step["id"] for step in receipt["steps"]]
    if len(ids) != len(set(ids)):
        raise ReceiptInvalid("step ids repeat")


def _time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


def receipt_path(repo: Path, receipt: dict[str, Any]) -> Path:
    variant, host, name = receipt["variant"], receipt["host_id"], receipt["receipt_id"]
    return repo / "qualification" / "receipts" / str(variant) / str(host) / f"{name}.json"


def write(path: Path, receipt: dict[str, Any]) -> None:
    """Publish atomically and never over an existing file (hard link of a synced temp file)."""
    validate(receipt)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = (json.dumps(receipt, indent=2, ensure_ascii=False) + "\n").encode()
    with temp.open("xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temp, path)
    finally:
        temp.unlink()
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def check(path: Path, repo: Path) -> list[str]:
    """Re-check a receipt file; returns notes on what could not be re-checked here."""
    try:
        receipt = strict_json(path.read_bytes())
    except (OSError, ValueError) as error:
        raise ReceiptInvalid(f"cannot read {path}: {error}") from None
    validate(receipt)
    notes: list[str] = []
    absolute = path.resolve()
    receipts = (repo / "qualification" / "receipts").resolve()
    if absolute.is_relative_to(receipts) and absolute != receipt_path(repo, receipt).resolve():
        raise ReceiptInvalid(f"{path} is not at receipts/VARIANT/HOST/RECEIPT_ID.json")
    commit = receipt["source"]["git_commit"]
    if not has_commit(repo, commit):
        notes.append(f"commit {commit} is not in this repository: workload and tree not re-checked")
    else:
        workload = committed_bytes(repo, commit, receipt["workload"]["path"])
        if workload is None or sha256_bytes(workload) != receipt["workload"]["sha256"]:
            raise ReceiptInvalid(
                f"workload digest differs from {receipt['workload']['path']} at {commit}"
            )
        if tree_hash(repo, commit)[0] != receipt["source"]["tree_hash"]:
            raise ReceiptInvalid(f"source tree hash differs from the tree of commit {commit}")
    for step in receipt["steps"]:
        for stream in ("stdout", "stderr"):
            log = step[stream]
            if log is None:
                continue
            local = repo / log["path"]
            if not local.is_file():
                notes.append(f"{log['path']} is not on this machine: not re-checked")
            elif sha256_file(local) != (log["sha256"], log["bytes"]):
                raise ReceiptInvalid(f"{log['path']} differs from its recorded digest")
    return notes
