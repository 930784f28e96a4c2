"""The HTTP hand-off benchmark runs end to end with a 4 MiB adapter (numbers:
docs/performance.md, "The HF/TRL hand-off over HTTP").

The completed bundle is the import tests' shared build, so nothing is trained here. Only the
report's shape and byte accounting are checked, never a timing: every side installed the
adapter (a 201, or the CLI's verified answer) or downloaded the same archive bytes, or the
benchmark itself raises.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from benchmarks import hf_http_transfer

MiB = 2**20
if shutil.which("curl") is None:
    pytest.skip("curl is not installed", allow_module_level=True)


def test_hf_http_transfer_benchmark_smoke(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    from tests.hf.importer.conftest import completed_sft_bundle

    built = completed_sft_bundle(tmp_path_factory)
    args = argparse.Namespace(adapter_mib=4, rounds=1)
    report = hf_http_transfer.run(args, tmp_path, (built.model, built.bundle))
    assert 3 * MiB < report["adapter_bytes"] <= 4 * MiB + 4096
    assert report["adapter_rank"] > 2  # the trained rank, enlarged
    imports, downloads = report["import"], report["download"]
    assert set(imports["sides"]) == {"cli", "curl_data_binary", "curl_stream"}
    assert set(imports["vs_data_binary"]) == {"wall_ratio", "client_cpu_ratio"}
    assert set(downloads["sides"]) == {"cli_fetch", "curl_sha256sum"}
    # the export carries the big adapter as its input adapter, barely compressed
    assert downloads["archive_bytes"] > report["adapter_bytes"]
    for side in [*imports["sides"].values(), *downloads["sides"].values()]:
        assert side["wall_s"] > 0
        assert side["rss_mib"] > 0
        assert side["server_rss_mib"] > 0
    assert imports["wall_ratio"] > 0
    assert downloads["client_cpu_ratio"] > 0
    assert downloads["cli_export_sft_with_create"]["wall_s"] > 0
    assert original_untouched(built.bundle)


def original_untouched(bundle: Path) -> bool:
    """The shared bundle keeps its trained rank-2 adapter (the benchmark enlarged a copy)."""
    return '"r": 2,' in (bundle / "adapter_config.json").read_text()
