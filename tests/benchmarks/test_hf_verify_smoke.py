"""The HF verification benchmark runs end to end at 8 MiB (numbers: docs/performance.md).

Only the report's shape and byte accounting are checked, never a timing: this proves the
benchmark builds a valid model, exports it, runs every measured command successfully and
removes its scratch directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

from benchmarks import hf_verify

MiB = 2**20
TIMED = {
    "sha256sum_bundle", "hashlib_bundle", "verify_lib", "verify_cli",
    "sha256sum_train", "hashlib_train", "train_py",
    "sha256sum_resident", "hashlib_resident", "resident",
}
RATIOS = {
    "verify_lib_vs_sha256sum", "verify_cli_vs_sha256sum", "train_py_vs_sha256sum",
    "resident_vs_sha256sum", "verify_lib_vs_hashlib", "train_py_vs_hashlib",
    "resident_vs_hashlib",
}


def test_hf_verify_benchmark_smoke(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["--size-mib", "8", "--shards", "3", "--rounds", "1", "--tmpdir", str(tmp_path)]
    assert hf_verify.main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone
    assert (report["size_mib"], report["adapter_mib"], report["shards"]) == (8, 2, 3)
    sets = report["sets"]
    # 8 MiB of shard payload (3, 3, 2 MiB) plus headers, config, tokenizer and template.
    assert 8 * MiB < sets["resident"]["bytes"] < 9 * MiB
    assert sets["resident"]["files"] == 3 + 3
    # The bundle carries the 2 MiB input adapter but no base weights.
    assert 2 * MiB < sets["bundle"]["bytes"] < 3 * MiB
    # train.py reads the bundle, every shard and the model's tokenizer.json.
    assert sets["train"]["files"] == sets["bundle"]["files"] + 3 + 1
    assert sets["train"]["bytes"] > sets["bundle"]["bytes"] + 8 * MiB
    assert set(report["timings"]) == TIMED
    for row in report["timings"].values():
        assert set(row) == {"min_s", "median_s"}
        assert 0 < row["min_s"] <= row["median_s"]
    assert isinstance(report["verify_cli_overhead_s"], float)
    assert set(report["ratios"]) == RATIOS
    assert all(value > 0 for value in report["ratios"].values())


def test_hf_verify_benchmark_rejects_an_empty_model() -> None:
    with pytest.raises(SystemExit) as exit_info:
        hf_verify.main(["--size-mib", "0"])
    assert exit_info.value.code == 2
