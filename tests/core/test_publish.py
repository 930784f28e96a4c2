"""Atomic no-clobber publication: success paths, refusals, and cleanup after failures."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.core import rename
from kiln_verify.core.publish import (
    publish_bytes,
    publish_directory,
    publish_file,
    staged_directory,
)
from kiln_verify.errors import KilnError


def entries(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def tree(root: Path) -> dict[str, bytes]:
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def code_of(call: Callable[[], object]) -> str:
    with pytest.raises(KilnError) as caught:
        call()
    return caught.value.code


# --- success -----------------------------------------------------------------------------


def test_publish_bytes(tmp_path: Path) -> None:
    publish_bytes(tmp_path / "out.json", b'{"a":1}\n')
    assert (tmp_path / "out.json").read_bytes() == b'{"a":1}\n'
    assert entries(tmp_path) == ["out.json"]


def test_publish_bytes_relative_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    publish_bytes("plain", b"x")
    assert (tmp_path / "plain").read_bytes() == b"x"


def test_publish_file_copies_a_regular_file(tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    data = os.urandom(2 * 1024 * 1024 + 3)
    source.write_bytes(data)
    publish_file(tmp_path / "copy.bin", source, max_bytes=len(data))
    assert (tmp_path / "copy.bin").read_bytes() == data
    assert code_of(lambda: publish_file(tmp_path / "c2", source, max_bytes=len(data) - 1)) == (
        "publish_failed"
    )
    assert entries(tmp_path) == ["copy.bin", "source.bin"]


def test_publish_file_refuses_a_symlinked_source(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert code_of(lambda: publish_file(tmp_path / "out", tmp_path / "link")) == "path_symlink"
    assert entries(tmp_path) == ["link", "real"]


def test_publish_directory(tmp_path: Path) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"weights")
    files: dict[str, Any] = {
        "manifest.json": b"{}\n",
        "input_adapter/adapter_config.json": b'{"r":8}',
        "input_adapter/adapter_model.safetensors": source,
        "a/b/c/d.txt": bytearray(b"deep"),
    }
    publish_directory(tmp_path / "bundle.kiln-hf", files)
    assert tree(tmp_path / "bundle.kiln-hf") == {
        "manifest.json": b"{}\n",
        "input_adapter/adapter_config.json": b'{"r":8}',
        "input_adapter/adapter_model.safetensors": b"weights",
        "a/b/c/d.txt": b"deep",
    }
    assert (tmp_path / "bundle.kiln-hf").stat().st_mode & 0o777 == 0o700
    assert entries(tmp_path) == ["bundle.kiln-hf", "weights.bin"]


def test_staged_directory_streams_and_applies_modes(tmp_path: Path) -> None:
    target = tmp_path / "rollouts"
    with staged_directory(target, dir_mode=0o755, file_mode=0o600) as stage:
        with stage.open("rows.jsonl") as stream:
            for index in range(1000):
                stream.write(b'{"i":%d}\n' % index)
        stage.write_bytes("nested/summary.json", b"{}")
        assert not target.exists()
        assert Path(stage.path).name.startswith(".rollouts.incomplete-")
        assert (Path(stage.path) / "nested" / "summary.json").read_bytes() == b"{}"
    assert len((target / "rows.jsonl").read_bytes().splitlines()) == 1000
    assert target.stat().st_mode & 0o777 == 0o755
    assert (target / "nested").stat().st_mode & 0o777 == 0o755
    assert (target / "rows.jsonl").stat().st_mode & 0o777 == 0o600
    assert entries(tmp_path) == ["rollouts"]


def test_empty_directory_can_be_published(tmp_path: Path) -> None:
    publish_directory(tmp_path / "empty", {})
    assert entries(tmp_path / "empty") == []


# --- refusals: existing targets are never touched ----------------------------------------


def _snapshot(path: Path) -> tuple[int, int, dict[str, bytes] | bytes]:
    info = path.stat()
    content = tree(path) if path.is_dir() else path.read_bytes()
    return info.st_mtime_ns, info.st_ino, content


def test_existing_file_target_is_never_modified(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_bytes(b"original")
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    before = _snapshot(target)
    assert code_of(lambda: publish_bytes(target, b"new")) == "target_exists"
    assert code_of(lambda: publish_directory(target, {"a": b"new"})) == "target_exists"
    assert code_of(lambda: publish_file(target, target)) == "target_exists"
    assert _snapshot(target) == before
    assert entries(tmp_path) == ["out.json"]


def test_existing_directory_target_is_never_modified(tmp_path: Path) -> None:
    target = tmp_path / "bundle"
    target.mkdir()
    (target / "keep").write_bytes(b"keep")
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    before = _snapshot(target)
    assert code_of(lambda: publish_directory(target, {"keep": b"new", "x": b"y"})) == (
        "target_exists"
    )
    assert code_of(lambda: publish_bytes(target, b"new")) == "target_exists"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert code_of(lambda: publish_directory(empty, {"a": b"b"})) == "target_exists"
    assert entries(empty) == []
    assert _snapshot(target) == before
    assert entries(tmp_path) == ["bundle", "empty"]


def test_target_appearing_during_publication_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "raced"
    real = rename.noreplace

    def racing(dir_fd: int, source: str, dest: str, *, allow_link: bool) -> None:
        (tmp_path / dest).mkdir()
        (tmp_path / dest / "theirs").write_bytes(b"theirs")
        real(dir_fd, source, dest, allow_link=allow_link)

    monkeypatch.setattr(rename, "noreplace", racing)
    assert code_of(lambda: publish_directory(target, {"mine": b"mine"})) == "target_exists"
    assert tree(target) == {"theirs": b"theirs"}
    assert entries(tmp_path) == ["raced"]


def test_file_target_appearing_during_publication_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = rename.noreplace

    def racing(dir_fd: int, source: str, dest: str, *, allow_link: bool) -> None:
        (tmp_path / dest).write_bytes(b"theirs")
        real(dir_fd, source, dest, allow_link=allow_link)

    monkeypatch.setattr(rename, "noreplace", racing)
    assert code_of(lambda: publish_bytes(tmp_path / "f", b"mine")) == "target_exists"
    assert (tmp_path / "f").read_bytes() == b"theirs"
    assert entries(tmp_path) == ["f"]


def test_symlinked_target_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name in ("link", "dangling"):
        target = tmp_path / name
        assert code_of(lambda: publish_bytes(target, b"x")) == "symlink_refused"  # noqa: B023
        assert code_of(lambda: publish_directory(target, {})) == "symlink_refused"  # noqa: B023
    assert not (tmp_path / "nowhere").exists()
    assert entries(tmp_path / "real") == []


def test_symlinked_parent_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert code_of(lambda: publish_bytes(tmp_path / "link" / "out", b"x")) == "symlink_refused"
    assert code_of(lambda: publish_directory(tmp_path / "link" / "d", {})) == "symlink_refused"
    assert entries(tmp_path / "real") == []


def test_missing_or_non_directory_parent(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    assert code_of(lambda: publish_bytes(tmp_path / "none" / "out", b"x")) == "publish_failed"
    assert code_of(lambda: publish_bytes(tmp_path / "file" / "out", b"x")) == "publish_failed"
    assert code_of(lambda: publish_bytes("/", b"x")) == "publish_failed"
    assert code_of(lambda: publish_bytes(tmp_path / "..", b"x")) == "publish_failed"


@pytest.mark.parametrize(
    ("files", "code"),
    [
        ({"../escape": b"x"}, "path_invalid"),
        ({"/abs": b"x"}, "path_invalid"),
        ({"a": b"x", "a/b": b"y"}, "path_invalid"),
        ({"a\\b": b"x"}, "path_invalid"),
    ],
)
def test_bad_layouts_are_refused_before_anything_is_created(
    tmp_path: Path, files: dict[str, bytes], code: str
) -> None:
    assert code_of(lambda: publish_directory(tmp_path / "out", files)) == code
    assert entries(tmp_path) == []


def test_writing_a_file_twice_is_refused(tmp_path: Path) -> None:
    def twice() -> None:
        with staged_directory(tmp_path / "out") as stage:
            stage.write_bytes("a", b"1")
            stage.write_bytes("a", b"2")

    assert code_of(twice) == "path_invalid"
    assert entries(tmp_path) == []


# --- failures leave nothing behind -------------------------------------------------------


class Boom(Exception):
    pass


def _fail_on_call(
    monkeypatch: pytest.MonkeyPatch, name: str, when: int, error: BaseException
) -> None:
    real = getattr(os, name)
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == when:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)  # publish calls os.<name> at run time


@pytest.mark.parametrize("when", [1, 2, 5, 9])
@pytest.mark.parametrize(
    "error",
    [OSError(28, "No space left on device"), KeyboardInterrupt(), Boom()],
    ids=["enospc", "interrupt", "exception"],
)
def test_directory_staging_is_removed_after_a_failed_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: int, error: BaseException
) -> None:
    _fail_on_call(monkeypatch, "fsync", when, error)
    files = {f"d{i % 2}/f{i}": b"x" * 1000 for i in range(6)}
    expected: type[BaseException] = KilnError if isinstance(error, OSError) else type(error)
    with pytest.raises(expected) as caught:
        publish_directory(tmp_path / "out", files)
    if isinstance(caught.value, KilnError):
        assert caught.value.code == "publish_failed"
    monkeypatch.undo()
    assert entries(tmp_path) == []


@pytest.mark.parametrize(
    "error", [OSError(5, "Input/output error"), KeyboardInterrupt()], ids=["eio", "interrupt"]
)
def test_file_staging_is_removed_after_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    _fail_on_call(monkeypatch, "write", 1, error)
    with pytest.raises((KilnError, KeyboardInterrupt)):
        publish_bytes(tmp_path / "out", b"data")
    monkeypatch.undo()
    assert entries(tmp_path) == []


def test_exception_inside_staged_block_discards_everything(tmp_path: Path) -> None:
    def body() -> None:
        with staged_directory(tmp_path / "out") as stage:
            stage.write_bytes("a/b", b"1")
            raise Boom

    with pytest.raises(Boom):
        body()
    assert entries(tmp_path) == []


def test_parent_fsync_failure_takes_the_publication_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fsyncs: 2 files, 1 subdirectory + root (seal), root again, then the parent.
    _fail_on_call(monkeypatch, "fsync", 6, OSError(5, "Input/output error"))
    assert code_of(lambda: publish_directory(tmp_path / "out", {"a": b"1", "s/b": b"2"})) == (
        "publish_failed"
    )
    monkeypatch.undo()
    assert entries(tmp_path) == []


# --- the no-clobber primitive ------------------------------------------------------------


def test_file_falls_back_to_link_when_renameat2_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rename, "_renameat2", None)
    publish_bytes(tmp_path / "out", b"data")
    assert (tmp_path / "out").read_bytes() == b"data"
    assert code_of(lambda: publish_bytes(tmp_path / "out", b"new")) == "target_exists"
    assert (tmp_path / "out").read_bytes() == b"data"
    assert entries(tmp_path) == ["out"]


def test_directory_refuses_to_publish_without_renameat2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rename, "_renameat2", None)
    assert code_of(lambda: publish_directory(tmp_path / "out", {"a": b"1"})) == "publish_failed"
    assert entries(tmp_path) == []


def test_renameat2_never_replaces(tmp_path: Path) -> None:
    (tmp_path / "src").write_bytes(b"src")
    (tmp_path / "dst").write_bytes(b"dst")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for allow_link in (True, False):
            with pytest.raises(FileExistsError):
                rename.noreplace(fd, "src", "dst", allow_link=allow_link)
        rename.noreplace(fd, "src", "moved", allow_link=False)
    finally:
        os.close(fd)
    assert tree(tmp_path) == {"dst": b"dst", "moved": b"src"}


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in rename._SYSCALL_NUMBERS,
    reason="raw renameat2 system call numbers are only known for some Linux machines",
)
def test_raw_system_call_fallback_never_replaces(tmp_path: Path) -> None:
    via_syscall = rename._load(use_wrapper=False)
    assert via_syscall is not None
    (tmp_path / "src").write_bytes(b"src")
    (tmp_path / "dst").write_bytes(b"dst")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert via_syscall(fd, b"src", fd, b"dst", rename.RENAME_NOREPLACE) == -1
        assert via_syscall(fd, b"src", fd, b"moved", rename.RENAME_NOREPLACE) == 0
    finally:
        os.close(fd)
    assert tree(tmp_path) == {"dst": b"dst", "moved": b"src"}
