"""Offline verification throughput and memory versus ``sha256sum`` over the same files.

Synthesizes consistent bundles (scripted deterministic episodes, see
kiln_verify/testing/bundles.py) in two shapes, each at two sizes (the large one and
``--small-fraction`` of its groups):

* ``max`` (the target's shape, issue 4): a bundle at the contract's maximum sizes:
  ``MAX_ROLLOUTS`` rollouts (2,048 groups x 8) with observations and model reasoning padded
  so the corpus and the replay each fill ``--fill`` (default 97 %) of their 256 MiB caps
  (the summary is then at its own natural maximum, about 7 MiB: its records have a fixed
  shape). About 505 MiB in all; generation takes about half a minute.
* ``dense``: the same rollout count with 512 characters per observation and one character
  of reasoning (about 70 MiB): the per-record worst case, where the fixed cost of each of
  the 16,384 rollouts (validation, cross-file comparison) outweighs the bytes. Reported
  beside the target, not instead of it.

For each bundle:

* times ``sha256sum`` over the three files (subprocess wall time, best of ``--rounds``);
* times :func:`kiln_verify.openenv.verify.verify_bundle` inside a fresh child process
  (best of ``--rounds``; interpreter start-up and imports are not timed);
* reports both wall time (``ratio``) and CPU time (``cpu_ratio``: user + system of
  ``sha256sum``, ``process_time`` of the verifying child), the latter being what a
  loaded machine distorts least;
* times the CLI, ``kiln-verify openenv verify --summary ...``, as a whole subprocess
  (``cli_ratio``: start-up and imports included, as a user meets it);
* measures the verifying child's peak RSS with ``getrusage(RUSAGE_CHILDREN).ru_maxrss``
  in a fresh wrapper process per measurement (it must not grow from the small to the
  large bundle).

``--scale`` (below 1) shrinks the group count of both shapes, for a quick run.

    python -m benchmarks.verify_throughput --json
    python -m benchmarks.verify_throughput --shape max
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import best_child, best_of, kiln_verify_script  # noqa: E402
from kiln_verify.limits import (  # noqa: E402
    MAX_OPENENV_DATASET_BYTES,
    MAX_OPENENV_REPLAY_BYTES,
    MAX_ROLLOUTS,
)
from kiln_verify.testing.bundles import FixtureBundle, build_fixture_bundle  # noqa: E402

GROUP_SIZE = 8
GROUPS = MAX_ROLLOUTS // GROUP_SIZE
PAD = 512
PROBE_GROUPS = 20
"""Probe bundles' group count: a multiple of the builder's 2 environments x 5 scripts."""
PROBE_PAD = 1000

_CHILD = """
import sys, time
from kiln_verify.openenv.verify import verify_bundle
start, cpu = time.perf_counter(), time.process_time()
report = verify_bundle(sys.argv[1])
print(time.perf_counter() - start, time.process_time() - cpu)
"""

_WRAPPER = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], check=True,
               stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _sizes(directory: Path, *, pad: int, reasoning: int) -> tuple[int, int]:
    bundle = build_fixture_bundle(
        directory, groups=PROBE_GROUPS, group_size=GROUP_SIZE, pad=pad, reasoning=reasoning
    )
    return bundle.dataset.stat().st_size, bundle.replay.stat().st_size


def max_size_pads(directory: Path, fill: float) -> tuple[int, int]:
    """Observation and reasoning padding that fill ``fill`` of the corpus and replay caps.

    Both files grow linearly in each knob, so three probe bundles give the slopes: the
    observation padding is sized for the replay, then the reasoning padding for whatever
    the corpus still lacks.
    """
    base_corpus, base_replay = _sizes(directory / "p0", pad=0, reasoning=0)
    pad_corpus, pad_replay = _sizes(directory / "p1", pad=PROBE_PAD, reasoning=0)
    think_corpus, _ = _sizes(directory / "p2", pad=0, reasoning=PROBE_PAD)
    per_group = GROUPS / PROBE_GROUPS
    replay_slope = (pad_replay - base_replay) * per_group / PROBE_PAD
    pad = int((fill * MAX_OPENENV_REPLAY_BYTES - base_replay * per_group) / replay_slope)
    corpus = (base_corpus + (pad_corpus - base_corpus) * pad / PROBE_PAD) * per_group
    think_slope = (think_corpus - base_corpus) * per_group / PROBE_PAD
    reasoning = int((fill * MAX_OPENENV_DATASET_BYTES - corpus) / think_slope)
    if pad < 0 or reasoning < 0:
        raise ValueError(f"--fill {fill} is below the unpadded bundle's size")
    return pad, reasoning


def synthesize(
    directory: Path, *, shape: str, fraction: float, pads: tuple[int, int] | None = None
) -> FixtureBundle:
    groups = max(2, int(GROUPS * min(fraction, 1.0)))
    if shape == "dense":
        return build_fixture_bundle(directory, groups=groups, group_size=GROUP_SIZE, pad=PAD)
    assert pads is not None
    pad, reasoning = pads
    return build_fixture_bundle(
        directory, groups=groups, group_size=GROUP_SIZE, pad=pad, reasoning=reasoning
    )


def _files(bundle: FixtureBundle) -> list[str]:
    return [str(bundle.dataset), str(bundle.replay), str(bundle.summary)]


def time_sha256sum(bundle: FixtureBundle, rounds: int) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system) of ``sha256sum`` over the files."""
    return best_of(["sha256sum", *_files(bundle)], rounds)


def time_verify(bundle: FixtureBundle, rounds: int) -> tuple[float, float]:
    """Best wall time and best CPU time of ``verify_bundle`` in a fresh child process
    (both are reported; CPU is what a loaded machine distorts least)."""
    return best_child(_CHILD, str(bundle.summary), rounds)


def time_cli(bundle: FixtureBundle, rounds: int) -> float:
    """Best wall time of ``kiln-verify openenv verify`` as a user runs it: a subprocess
    like ``sha256sum``, so interpreter start-up and imports count."""
    argv = [kiln_verify_script(), "openenv", "verify", "--summary", str(bundle.summary)]
    return best_of(argv, rounds)[0]


def peak_rss_kib(bundle: FixtureBundle) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, _CHILD, str(bundle.summary)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    return int(out.stdout.strip())


def measure(bundle: FixtureBundle, rounds: int) -> dict[str, Any]:
    sizes = {
        name: Path(path).stat().st_size
        for name, path in zip(("dataset", "replay", "summary"), _files(bundle), strict=True)
    }
    sha, sha_cpu = time_sha256sum(bundle, rounds)
    verify, verify_cpu = time_verify(bundle, rounds)
    cli = time_cli(bundle, rounds)
    return {
        "bytes": sizes,
        "total_mib": round(sum(sizes.values()) / 2**20, 2),
        "sha256sum_s": round(sha, 4),
        "verify_s": round(verify, 4),
        "ratio": round(verify / sha, 2),
        "sha256sum_cpu_s": round(sha_cpu, 4),
        "verify_cpu_s": round(verify_cpu, 4),
        "cpu_ratio": round(verify_cpu / sha_cpu, 2) if sha_cpu > 0 else None,
        "cli_s": round(cli, 4),
        "cli_ratio": round(cli / sha, 2),
        "peak_rss_mib": round(peak_rss_kib(bundle) / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("max", "dense", "both"), default="both")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the groups")
    parser.add_argument("--small-fraction", type=float, default=0.25)
    parser.add_argument("--fill", type=float, default=0.97, help="of the 256 MiB caps")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.fill <= 1:
        parser.error("--fill must be in (0, 1]")
    shapes = ("max", "dense") if args.shape == "both" else (args.shape,)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            pads = max_size_pads(Path(tmp) / "probe", args.fill) if shape == "max" else None
            for label, fraction in (
                ("small", args.scale * args.small_fraction),
                ("large", args.scale),
            ):
                start = time.perf_counter()
                directory = Path(tmp) / f"{shape}-{label}"
                bundle = synthesize(directory, shape=shape, fraction=fraction, pads=pads)
                built = time.perf_counter() - start
                row: dict[str, Any] = {"scale": fraction, "build_s": round(built, 2)}
                if pads is not None:
                    row["observation_pad"], row["reasoning_pad"] = pads
                results[f"{shape}-{label}"] = {**row, **measure(bundle, args.rounds)}
                shutil.rmtree(directory)  # half a GiB each: keep at most one on disk
        for shape in shapes:
            small, large = results[f"{shape}-small"], results[f"{shape}-large"]
            large["rss_growth_mib"] = round(large["peak_rss_mib"] - small["peak_rss_mib"], 1)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for label, row in results.items():
            print(f"{label}: {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
