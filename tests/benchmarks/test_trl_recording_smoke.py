"""The TRL recording benchmark runs end to end at its smoke shape (numbers: docs/performance.md).

Only the report's shape is checked, never a timing: both arms train (the hand-written
``environment_factory`` and kiln-verify's factory with the recorder, plus ``every=2``), the
recorded arms publish one bundle per recorded step with all three parts, and the scratch
directory is removed. The benchmark runs in this process, which has already imported the
stack it trains with (a child would import torch, transformers, PEFT and TRL again: about
6 s of CPU); what its ``main`` changes for the process (torch's thread count,
``TRL_EXPERIMENTAL_SILENCE``) is put back afterwards. Its oracle and its recorder's worker
are still child processes, as in a user's run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("datasets")

pytestmark = pytest.mark.slow


def test_the_trl_recording_benchmark_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from benchmarks import trl_recording

    # main() sets both for the process; the monkeypatch and the finally undo them
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    threads = torch.get_num_threads()
    try:
        assert trl_recording.main(["--quick", "--json", "--tmpdir", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "trl_recording"
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone
    assert set(report["arms"]) == {"baseline", "kiln", "kiln_every2"}
    assert report["shape"]["optimizer_steps"] == 2
    for summary in report["arms"].values():
        assert len(summary["wall_s"]) == report["repeats"] == 1
        assert summary["steps_per_s"] > 0
        assert summary["sampled_tokens_per_step"] > 0
    for arm, recorded in (("kiln", 2), ("kiln_every2", 1)):
        summary = report["arms"][arm]
        assert summary["recorded_steps_per_run"] == recorded
        parts = summary["bytes_per_recorded_step"]
        assert min(parts["openenv"], parts["corpus"], parts["adapter"]) > 0
        assert abs(parts["total"] - (parts["openenv"] + parts["corpus"] + parts["adapter"])) <= 3
        ratios = report["ratios"][arm]
        assert min(ratios["ratio"], ratios["per_token_ratio"], ratios["cpu_ratio"]) > 0
        assert isinstance(ratios["met"], bool)
