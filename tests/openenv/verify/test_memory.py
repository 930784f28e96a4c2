"""Peak memory of offline verification does not grow with the bundle (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kiln_verify.testing.bundles import build_fixture_bundle

REPO_ROOT = Path(__file__).resolve().parents[3]

_CHILD = """
import resource, sys
from kiln_verify.openenv.verify import verify_bundle
verify_bundle(sys.argv[1])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kib(summary: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(summary)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    return int(out.stdout.strip())


@pytest.mark.slow
def test_peak_rss_is_independent_of_bundle_size(tmp_path: Path) -> None:
    small = build_fixture_bundle(tmp_path / "small", groups=32, group_size=8, pad=512)
    large = build_fixture_bundle(tmp_path / "large", groups=512, group_size=8, pad=512)
    small_bytes = sum(p.stat().st_size for p in (small.summary, small.replay, small.dataset))
    large_bytes = sum(p.stat().st_size for p in (large.summary, large.replay, large.dataset))
    assert large_bytes > 12 * small_bytes  # ~1 MiB against ~17 MiB
    small_kib, large_kib = _peak_kib(small.summary), _peak_kib(large.summary)
    # Whole-document parsing grew by ~4 MiB of RSS per MiB of bundle (+60 MiB here); the
    # streamed verifier holds one group at a time. Generous slack for allocator noise.
    assert large_kib - small_kib < 12 * 1024, (small_kib, large_kib)
