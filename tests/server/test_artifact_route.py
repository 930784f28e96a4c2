"""A pathname is not publication: the artifact route serves only verified manifest bytes.

One published run; each test damages its files one way (and the fixture restores them),
then asks for every kind. A damaged kind answers 409 ``openenv_artifact_integrity_failed``
and its body carries none of the drifted bytes; the undamaged kinds keep serving.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from kiln_verify.control.artifacts import open_verified
from kiln_verify.control.kinds import ROLLOUT
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.errors import ApiArtifactIntegrityFailed
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import control_server, run_to_end, small_request

NAMES = {
    "dataset": "openenv.rollouts.jsonl",
    "replay": "openenv.replay.json",
    "summary": "openenv.rollout-summary.json",
}
MARK = b"DRIFTED-BYTES-"


@dataclass
class Run:
    http: httpx.Client
    run_id: str
    directory: Path
    pristine: dict[str, bytes]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, bandit: OracleHandle) -> Iterator[Run]:
    state = tmp_path_factory.mktemp("serving")
    with (
        control_server(state) as server,
        httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
    ):
        status = run_to_end(http, small_request(bandit.base_url))
        directory = state / ".openenv" / "runs" / status["run_id"]
        pristine = {kind: (directory / name).read_bytes() for kind, name in NAMES.items()}
        yield Run(http, status["run_id"], directory, pristine)


@pytest.fixture
def run(published: Run) -> Iterator[Run]:
    yield published
    for kind, name in NAMES.items():  # put every original file back, whatever the test did
        path = published.directory / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.write_bytes(published.pristine[kind])


def _get(run: Run, kind: str) -> httpx.Response:
    return run.http.get(f"/v1/openenv/runs/{run.run_id}/artifacts/{kind}")


def _same_length(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x20]) + data[middle + 1 :]


def _replace_file(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".new")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _missing(path: Path, data: bytes) -> None:
    path.unlink()


def _replaced(path: Path, data: bytes) -> None:
    _replace_file(path, MARK + data)


def _replaced_same_length(path: Path, data: bytes) -> None:
    _replace_file(path, _same_length(data))


def _modified_in_place(path: Path, data: bytes) -> None:
    with path.open("r+b") as stream:  # same inode, same size, one byte different
        stream.write(_same_length(data))


def _truncated(path: Path, data: bytes) -> None:
    path.write_bytes(data[: len(data) // 2])


def _oversized(path: Path, data: bytes) -> None:
    path.write_bytes(data + MARK)


def _directory(path: Path, data: bytes) -> None:
    path.unlink()
    path.mkdir()


def _symlinked(path: Path, data: bytes) -> None:
    target = path.with_name("elsewhere.bin")
    target.write_bytes(data)  # even identical bytes behind a link are not served
    path.unlink()
    path.symlink_to(target)


DAMAGE: dict[str, Callable[[Path, bytes], None]] = {
    "missing": _missing,
    "replaced": _replaced,
    "replaced-same-length": _replaced_same_length,
    "modified-in-place": _modified_in_place,
    "truncated": _truncated,
    "oversized": _oversized,
    "directory": _directory,
    "symlinked": _symlinked,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("kind", ["dataset", "summary"])
def test_drifted_files_answer_409_and_serve_nothing(run: Run, kind: str, damage: str) -> None:
    DAMAGE[damage](run.directory / NAMES[kind], run.pristine[kind])
    refused = _get(run, kind)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "openenv_artifact_integrity_failed"
    assert MARK not in refused.content
    assert run.pristine[kind][:64] not in refused.content
    assert "etag" not in refused.headers
    other = "replay"
    assert _get(run, other).content == run.pristine[other]


def test_restored_files_serve_again_with_the_manifest_headers(run: Run) -> None:
    status = run.http.get(f"/v1/openenv/runs/{run.run_id}").json()
    for item in status["artifacts"]:
        answer = _get(run, item["kind"])
        assert answer.status_code == 200
        assert answer.content == run.pristine[item["kind"]]
        assert answer.headers["content-length"] == str(item["bytes"])
        assert answer.headers["etag"] == f'"{item["sha256"]}"'
        assert answer.headers["cache-control"] == "private, no-store"
        assert answer.headers["x-content-type-options"] == "nosniff"
        extension = "jsonl" if item["kind"] == "dataset" else "json"
        assert answer.headers["content-disposition"] == (
            f'attachment; filename="openenv-{run.run_id}-{item["kind"]}.{extension}"'
        )
        assert answer.headers["content-type"].startswith(
            "application/x-ndjson" if item["kind"] == "dataset" else "application/json"
        )


def test_files_outside_the_manifest_are_unreachable(run: Run) -> None:
    (run.directory / "extra.json").write_bytes(b"{}")
    try:
        for kind in ("extra", "run", "run.json", "openenv.replay.json", "../run.json"):
            answer = _get(run, kind)
            assert answer.status_code == 404
            assert answer.json()["error"]["code"] in (
                "openenv_artifact_not_found",
                "openenv_route_not_found",
            )
    finally:
        (run.directory / "extra.json").unlink()


def test_a_file_changed_after_the_check_is_never_what_the_check_approved(run: Run) -> None:
    # the descriptor is hashed and then streamed; a replacement after open changes nothing
    status = OpenEnvRunStatus.model_validate_json(
        run.http.get(f"/v1/openenv/runs/{run.run_id}").content
    )
    fd, entry = open_verified(status, run.directory, "summary", ROLLOUT.artifacts)
    try:
        _replace_file(run.directory / NAMES["summary"], MARK + run.pristine["summary"])
        assert os.read(fd, entry.bytes + 1) == run.pristine["summary"]
    finally:
        os.close(fd)
    with pytest.raises(ApiArtifactIntegrityFailed):
        open_verified(status, run.directory, "summary", ROLLOUT.artifacts)
