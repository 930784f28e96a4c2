"""Publication of recorded steps in the recorder's worker process, or on its background
thread with ``worker=False`` (BatchRecorder.wait); both ways, the same assertions.

The bundles are built and checked before the optimizer step; only the atomic, no-clobber
publication runs in the background, one at a time in step order. A target that appears
between the build's check and the publication (another writer) is the failure a real run
can meet; it is raised by ``wait`` (or at the next step's end), and nothing of that
bundle is written over what appeared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import TargetExists
from kiln_verify.trl.batch import GRPO, CapturedBatch
from kiln_verify.trl.factory import OpenEnvToolFactory
from kiln_verify.trl.identity import AdapterSnapshot
from kiln_verify.trl.recorder import BatchRecorder
from kiln_verify.trl.worker import RecordingWorker

pytestmark = pytest.mark.parametrize("worker", [True, False], ids=["worker", "thread"])


def _recorder(out: Path, tool_model: Path, factory: OpenEnvToolFactory, worker: bool) -> Any:
    recorder = BatchRecorder(out, model_dir=tool_model, factory=factory, worker=worker)
    recorder.rank = 0  # what attach sets, with the worker below
    recorder._worker = RecordingWorker() if worker else None
    return recorder


def _end_step(recorder: BatchRecorder, step: int, files: dict[str, bytes]) -> None:
    batch = CapturedBatch(step, AdapterSnapshot(b"{}", b""))
    batch.files = {**files, GRPO: b"{}\n"}
    recorder._batch = batch
    recorder._step_end(step)


def test_steps_are_published_in_order_and_wait_returns_them(
    tool_model: Path, tmp_path: Path, counter_factory: OpenEnvToolFactory, worker: bool
) -> None:
    recorder = _recorder(tmp_path / "out", tool_model, counter_factory, worker)
    for step in (1, 2, 3):
        _end_step(recorder, step, {"a.txt": f"step {step}".encode(), "d/b.bin": b"\x00"})
    published = recorder.wait()
    root = tmp_path / "out" / "rank-00000"
    assert published == [root / f"step-{step:06d}" for step in (1, 2, 3)]
    assert (root / "step-000002" / "a.txt").read_bytes() == b"step 2"
    assert (root / "step-000003" / "d" / "b.bin").read_bytes() == b"\x00"


def test_a_failed_publication_is_raised_and_leaves_what_appeared(
    tool_model: Path, tmp_path: Path, counter_factory: OpenEnvToolFactory, worker: bool
) -> None:
    recorder = _recorder(tmp_path / "out", tool_model, counter_factory, worker)
    _end_step(recorder, 1, {"a.txt": b"one"})
    taken = tmp_path / "out" / "rank-00000" / "step-000002"
    taken.mkdir(parents=True)
    (taken / "theirs").write_bytes(b"kept")
    _end_step(recorder, 2, {"a.txt": b"two"})
    with pytest.raises(TargetExists) as raised:
        recorder.wait()
    assert raised.value.code == "target_exists"
    assert recorder.published == [tmp_path / "out" / "rank-00000" / "step-000001"]
    assert sorted(p.name for p in taken.iterdir()) == ["theirs"]
    assert (taken / "theirs").read_bytes() == b"kept"


def test_a_relative_output_directory_is_the_one_given_whatever_the_cwd_later(
    tool_model: Path,
    tmp_path: Path,
    counter_factory: OpenEnvToolFactory,
    worker: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker process keeps the directory it started in; the recorder resolves a
    relative ``output_dir`` when it is given, so both publishers write to the same place."""
    monkeypatch.chdir(tmp_path)
    recorder = _recorder(Path("out"), tool_model, counter_factory, worker)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    _end_step(recorder, 1, {"a.txt": b"one"})
    assert recorder.wait() == [tmp_path / "out" / "rank-00000" / "step-000001"]
    assert (tmp_path / "out" / "rank-00000" / "step-000001" / "a.txt").read_bytes() == b"one"
    assert list(elsewhere.iterdir()) == []
