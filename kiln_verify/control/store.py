"""The durable state: one directory per run under ``<state_dir>/.openenv/runs/<run-id>/``.

Each run directory holds ``run.json`` (the ``kiln.openenv-run.v5`` status, pretty JSON,
at most ``MAX_RUN_STATUS_BYTES``) and, once published, the three bundle files. Every
write goes through :mod:`kiln_verify.core.publish`: a new run directory appears complete
with its first ``run.json`` (a staged directory renamed into place), and every later status
is an atomic, fsynced replacement, so a process killed at any instant leaves either the
previous complete status or the next one, never a torn file. Staging residue
(``.<name>.incomplete-*``) is never a run directory and is ignored when restoring.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.core.jsonenc import dumps_pretty
from kiln_verify.core.jsonio import loads
from kiln_verify.core.paths import open_regular
from kiln_verify.core.publish import publish_directory, replace_bytes
from kiln_verify.errors import KilnError, LimitExceeded, PathNotDirectory, RecordInvalid
from kiln_verify.limits import MAX_RUN_STATUS_BYTES
from kiln_verify.records import validate_record

__all__ = ["RUN_ID_PATTERN", "STATUS_FILE", "RestoredState", "RunStore", "status_bytes"]

STATUS_FILE: Final = "run.json"
RUN_ID_PATTERN: Final = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
"""Run ids are lower-case UUIDs; no other directory name is ever a run."""


def status_bytes(status: OpenEnvRunStatus) -> bytes:
    """The exact bytes of ``run.json``; refused above ``MAX_RUN_STATUS_BYTES``."""
    data = dumps_pretty(status.to_json())
    if len(data) > MAX_RUN_STATUS_BYTES:
        raise LimitExceeded(
            f"the status of run {status.run_id}",
            limit="MAX_RUN_STATUS_BYTES",
            bound=MAX_RUN_STATUS_BYTES,
            observed=len(data),
        )
    return data


@dataclass(slots=True)
class RestoredState:
    """What a scan of the state directory found: valid statuses and the entries skipped."""

    statuses: list[OpenEnvRunStatus] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class RunStore:
    """Reads and writes run directories below ``root`` (created on first use)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        info = os.lstat(root)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise PathNotDirectory("the runs root is not a real directory", path=root)

    def run_dir(self, run_id: str) -> Path:
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise ValueError("not a run id")
        return self.root / run_id

    def create(self, status: OpenEnvRunStatus) -> None:
        """Publish the run's directory with its first ``run.json``, all or nothing."""
        publish_directory(self.run_dir(status.run_id), {STATUS_FILE: status_bytes(status)})

    def save(self, status: OpenEnvRunStatus) -> None:
        """Atomically replace the run's ``run.json`` (fsynced file and directory)."""
        replace_bytes(self.run_dir(status.run_id) / STATUS_FILE, status_bytes(status))

    def load(self, run_id: str) -> OpenEnvRunStatus:
        """One run's status, strictly parsed; a typed error when unreadable or invalid."""
        path = self.run_dir(run_id) / STATUS_FILE
        with open_regular(path) as fd:
            size = os.fstat(fd).st_size
            if size > MAX_RUN_STATUS_BYTES:
                raise LimitExceeded(
                    "run.json",
                    limit="MAX_RUN_STATUS_BYTES",
                    bound=MAX_RUN_STATUS_BYTES,
                    observed=size,
                    path=path,
                )
            data = _read_at_most(fd, MAX_RUN_STATUS_BYTES)
        value = loads(data, max_bytes=MAX_RUN_STATUS_BYTES, source=str(path))
        status = validate_record(OpenEnvRunStatus, value, source=str(path))
        if status.run_id != run_id:
            raise RecordInvalid(
                f"run.json names run {status.run_id[:40]!r} but lives in {run_id}", path=path
            )
        return status

    def restore(self) -> RestoredState:
        """Every readable run directory's status; unreadable ones are listed, not fatal."""
        found = RestoredState()
        with os.scandir(self.root) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            if not RUN_ID_PATTERN.fullmatch(name):
                continue  # staging residue or foreign entries are never runs
            info = os.lstat(self.root / name)
            if not stat.S_ISDIR(info.st_mode):
                found.skipped.append(f"{name}: not a directory")
                continue
            try:
                found.statuses.append(self.load(name))
            except KilnError as exc:
                found.skipped.append(f"{name}: {exc.code}: {exc.rule}")
            except OSError as exc:
                found.skipped.append(f"{name}: {exc.strerror}")
        return found


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise LimitExceeded(
                "run.json", limit="MAX_RUN_STATUS_BYTES", bound=limit, observed=total
            )
    return b"".join(chunks)
