"""The multi-turn stream benchmark runs end to end at 1 MiB (numbers: docs/performance.md).

Only the report's shape is checked, never a timing: the corpus is built from real token
streams, the resealed bundle verifies with token replay, and the recording comparison runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from benchmarks import hf_stream


def test_the_stream_benchmark_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--corpus-mib", "1", "--rounds", "1", "--turns", "2", "--tokens", "4"]
    assert hf_stream.main([*args, "--tmpdir", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["corpus_bytes"] >= 2**20
    assert report["verify"]["ratio"] > 0
    assert report["recording"]["generated_tokens"] > 0
    assert list(tmp_path.iterdir()) == []
