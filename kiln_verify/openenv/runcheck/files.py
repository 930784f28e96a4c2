"""What a run directory holds, read as untrusted files.

A run directory (the server's own, or one ``openenv artifact RUN_ID --all`` wrote) keeps
each artifact at its path of :data:`kiln_verify.control.layout.ARTIFACT_PATHS` and the run
status as ``run.json``. Every file is opened beneath the directory without following a
link (``path_symlink``), must be regular (``path_not_regular``) and is read within its
bound; the status is Kiln's run record, read strictly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kiln_verify.control.layout import ARTIFACT_PATHS, RUN_STATUS_FILE
from kiln_verify.control.status import OpenEnvRunStatus, RunArtifact
from kiln_verify.core.digest import hash_fd, sha256_bytes
from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.paths import open_regular_beneath
from kiln_verify.errors import LimitExceeded, RunChainFileMismatch
from kiln_verify.limits import MAX_OPENENV_DATASET_BYTES, MAX_RUN_STATUS_BYTES
from kiln_verify.openenv.runcheck.records import RunFile
from kiln_verify.records import validate_record

__all__ = ["RunDirectory", "StatusFile", "hash_run_file", "read_bounded", "read_status"]


@dataclass(frozen=True, slots=True)
class StatusFile:
    """``run.json`` as read: the record and the SHA-256 of its bytes."""

    status: OpenEnvRunStatus
    sha256: str


def read_bounded(root: str, relative: str, limit: int, limit_name: str) -> bytes:
    """The bytes of a regular non-symlink file beneath ``root``, at most ``limit``."""
    shown = os.path.join(root, relative)
    with open_regular_beneath(root, relative) as fd:
        size = os.fstat(fd).st_size
        if size > limit:
            raise LimitExceeded("file", limit=limit_name, bound=limit, observed=size, path=shown)
        with open(fd, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
    if len(data) > limit:
        raise LimitExceeded("file", limit=limit_name, bound=limit, observed=len(data), path=shown)
    return data


def read_status(root: str) -> StatusFile | None:
    """``run.json`` beneath ``root`` as a checked run record; ``None`` when there is none."""
    if not os.path.lexists(os.path.join(root, RUN_STATUS_FILE)):
        return None
    data = read_bounded(root, RUN_STATUS_FILE, MAX_RUN_STATUS_BYTES, "MAX_RUN_STATUS_BYTES")
    shown = os.path.join(root, RUN_STATUS_FILE)
    value = loads_object(data, max_bytes=MAX_RUN_STATUS_BYTES, source=shown)
    status = validate_record(OpenEnvRunStatus, value, source=shown)
    return StatusFile(status, str(sha256_bytes(data)))


def hash_run_file(root: str, kind: str) -> RunFile:
    """The identity of the file of ``kind`` at its layout path."""
    relative = ARTIFACT_PATHS[kind]
    with open_regular_beneath(root, relative) as fd:
        digest = hash_fd(
            fd, max_bytes=MAX_OPENENV_DATASET_BYTES, shown=os.path.join(root, relative)
        )
    return RunFile(
        kind=kind, relative_path=relative, sha256=str(digest.sha256), bytes=digest.size_bytes
    )


@dataclass(frozen=True, slots=True)
class RunDirectory:
    """The directory and which artifact kinds have an entry at their layout path."""

    root: str
    present: frozenset[str]

    @classmethod
    def scan(cls, root: str | os.PathLike[str]) -> RunDirectory:
        text = os.fspath(root)
        present = frozenset(
            kind
            for kind, relative in ARTIFACT_PATHS.items()
            if os.path.lexists(os.path.join(text, relative))
        )
        return cls(text, present)

    def path(self, kind: str) -> str:
        return os.path.join(self.root, ARTIFACT_PATHS[kind])

    def read(self, kind: str, limit: int, limit_name: str) -> bytes:
        return read_bounded(self.root, ARTIFACT_PATHS[kind], limit, limit_name)

    def has(self, *kinds: str) -> bool:
        return all(kind in self.present for kind in kinds)

    def check_manifest(self, status: OpenEnvRunStatus, known: dict[str, RunFile]) -> list[RunFile]:
        """Every manifest entry is the file at its layout path (``known``: identities the
        bundle verifier already established from the bytes); no layout file is unlisted."""
        listed: dict[str, RunArtifact] = {item.kind: item for item in status.artifacts or ()}
        unlisted = sorted(self.present - set(listed), key=list(ARTIFACT_PATHS).index)
        if unlisted:
            raise RunChainFileMismatch(
                f"{ARTIFACT_PATHS[unlisted[0]]} is in the directory but the manifest lists no "
                f"{unlisted[0]} artifact",
                path=self.path(unlisted[0]),
            )
        files: list[RunFile] = []
        for kind in ARTIFACT_PATHS:
            entry = listed.get(kind)
            if entry is None:
                continue
            if kind not in self.present:
                raise RunChainFileMismatch(
                    f"the manifest lists {kind} but {ARTIFACT_PATHS[kind]} is missing",
                    path=self.path(kind),
                )
            found = known.get(kind) or hash_run_file(self.root, kind)
            if (found.sha256, found.bytes) != (entry.sha256, entry.bytes):
                raise RunChainFileMismatch(
                    f"{ARTIFACT_PATHS[kind]} has {found.bytes} bytes and {found.sha256}; the "
                    f"manifest lists {entry.bytes} bytes and {entry.sha256}",
                    path=self.path(kind),
                )
            files.append(found)
        return files
