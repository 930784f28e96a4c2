"""Control-plane benchmarks, each a ratio against a baseline measured in the same run.

1. **Artifact download** (target: at most 1.2x ``curl``, memory flat). A state directory
   holds a published run whose manifest binds a ``--size-mib`` dataset (synthetic bytes:
   the route serves and verifies any manifest file the same way). ``kiln-verify serve``
   serves it; ``curl -o`` of the artifact URL is the baseline, against
   :func:`kiln_verify.control_client.download.download_artifact` in a fresh child process (all
   §11 checks, hashing, staging, fsync and no-clobber publication; imports not timed),
   and the CLI ``kiln-verify openenv artifact`` as a whole subprocess (start-up included).
   Both sides pay the server's own re-hash of the file before it streams. Because the
   client fsyncs and ``curl`` does not, ``curl`` followed by an fsync of its output is
   reported too. Peak RSS of the downloading child is measured for a small and the full
   artifact (``ru_maxrss``): it must not grow with the artifact.
2. **Run creation latency**: ``--clients`` threads each ``POST`` a new run at the same
   moment, ``--rounds`` times; p50/p99 of those requests against the same concurrency of
   ``GET /health`` (the framework's floor on this machine).
3. **Metrics scrape**: ``GET /metrics`` with ``--tracked`` tracked runs (the default
   ``max_tracked_runs``), median of ``--scrapes``, against ``GET /health``.

    python -m benchmarks.control_plane --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from kiln_verify.control.admission import parse_run_request  # noqa: E402
from kiln_verify.control.status import (  # noqa: E402
    RUN_SCHEMA,
    OpenEnvRunStatus,
    RunAdmission,
    RunArtifact,
    RunProgress,
)
from kiln_verify.control.store import RunStore  # noqa: E402
from kiln_verify.core.digest import hash_file  # noqa: E402
from kiln_verify.testing.serve import READY_LINE  # noqa: E402

MiB = 1024 * 1024
CLI = "from kiln_verify.cli import main; main()"
_DOWNLOAD_CHILD = """
import sys, time
from kiln_verify.control_client.client import ControlClient
from kiln_verify.control_client.download import download_artifact
url, run_id, output = sys.argv[1:4]
with ControlClient(url) as client:
    start = time.perf_counter()
    download_artifact(client, run_id, "dataset", output, force=True)
    print(time.perf_counter() - start)
"""
_WRAPPER = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], check=True,
               stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


class Serve:
    """`kiln-verify serve` in its own process on a state directory."""

    def __init__(self, state_dir: Path, config: Path | None = None) -> None:
        argv = [sys.executable, "-c", CLI, "serve", "--port", "0", "--state-dir", str(state_dir)]
        if config is not None:
            argv += ["--config", str(config)]
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env()
        )
        assert self.process.stdout is not None
        found = READY_LINE.search(self.process.stdout.readline())
        if found is None:
            self.process.kill()
            raise RuntimeError("kiln-verify serve did not start")
        self.url = found.group(1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _published_run(state_dir: Path, size: int) -> str:
    """A retained rollout_ready run whose manifest binds a ``size``-byte dataset."""
    store = RunStore(state_dir / ".openenv" / "runs")
    run_id = str(uuid.uuid4())
    request = parse_run_request({"environment_urls": ["http://127.0.0.1:1"], "groups": 1})
    status = OpenEnvRunStatus(
        schema=RUN_SCHEMA,
        run_id=run_id,
        kind="rollout",
        state="rollout_ready",
        request=request,
        submitted_unix_ms=1,
        finished_unix_ms=int(time.time() * 1000),
        admission=RunAdmission(max_active_runs=4, sequence=1, admitted_unix_ms=1, queue_wait_ms=0),
        progress=RunProgress(
            groups_completed=1, groups_total=1, rollouts_completed=4, rollouts_total=4
        ),
    )
    store.create(status)
    path = store.run_dir(run_id) / "openenv.rollouts.jsonl"
    line = b'{"messages": [], "completions": [], "pad": "' + b"x" * 1000 + b'"}\n'
    with path.open("wb") as stream:
        written = 0
        while written < size:
            chunk = line[: size - written]
            stream.write(chunk)
            written += len(chunk)
    digest = hash_file(path, max_bytes=size)
    artifact = RunArtifact(
        kind="dataset",
        url=f"/v1/openenv/runs/{run_id}/artifacts/dataset",
        sha256=str(digest.sha256),
        bytes=digest.size_bytes,
    )
    store.save(status.model_copy(update={"artifacts": [artifact]}))
    return run_id


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env()
    )
    return time.perf_counter() - start


def _fsync(path: Path) -> float:
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def _peak_rss_kib(url: str, run_id: str, output: Path) -> int:
    result = subprocess.run(
        [sys.executable, "-c", _WRAPPER, _DOWNLOAD_CHILD, url, run_id, str(output)],
        check=True,
        capture_output=True,
        text=True,
        env=_env(),
    )
    return int(result.stdout.strip())


def bench_download(
    serve: Serve, run_id: str, small_id: str, size_mib: int, rounds: int, work: Path
) -> dict[str, Any]:
    curl = shutil.which("curl")
    if curl is None:
        raise SystemExit("curl is not installed")
    small = max(1, size_mib // 16) * MiB
    try:
        url = f"{serve.url}/v1/openenv/runs/{run_id}/artifacts/dataset"
        out_curl, out_client = work / "curl.jsonl", work / "client.jsonl"

        def curl_once() -> float:
            return _timed([curl, "-s", "-f", "-o", str(out_curl), url])

        def curl_synced() -> float:
            took = curl_once()
            return took + _fsync(out_curl)

        def client_once() -> float:
            result = subprocess.run(
                [sys.executable, "-c", _DOWNLOAD_CHILD, serve.url, run_id, str(out_client)],
                check=True,
                capture_output=True,
                text=True,
                env=_env(),
            )
            return float(result.stdout.strip())

        def cli_once() -> float:
            return _timed(
                [
                    sys.executable,
                    "-c",
                    CLI,
                    "openenv",
                    "artifact",
                    run_id,
                    "dataset",
                    "--output",
                    str(out_client),
                    "--force",
                    "--url",
                    serve.url,
                ]
            )

        # Alternate the sides round by round, so that load changing on a shared machine
        # hits both; the best of each side is reported.
        timings: dict[str, list[float]] = {"curl": [], "curl_fsync": [], "client": [], "cli": []}
        for _ in range(rounds):
            timings["curl"].append(curl_once())
            timings["client"].append(client_once())
            timings["curl_fsync"].append(curl_synced())
            timings["cli"].append(cli_once())
        curl_s, curl_sync_s = min(timings["curl"]), min(timings["curl_fsync"])
        client_s, cli_s = min(timings["client"]), min(timings["cli"])
        assert out_curl.read_bytes()[:64] == out_client.read_bytes()[:64]
        rss_small = _peak_rss_kib(serve.url, small_id, work / "small.jsonl")
        rss_large = _peak_rss_kib(serve.url, run_id, work / "large.jsonl")
    finally:
        for path in (work / "curl.jsonl", work / "client.jsonl", work / "large.jsonl"):
            path.unlink(missing_ok=True)
    return {
        "size_mib": size_mib,
        "curl_s": round(curl_s, 4),
        "curl_fsync_s": round(curl_sync_s, 4),
        "client_s": round(client_s, 4),
        "cli_s": round(cli_s, 4),
        "ratio": round(client_s / curl_s, 3),
        "median_ratio": round(
            statistics.median(timings["client"]) / statistics.median(timings["curl"]), 3
        ),
        "ratio_vs_curl_fsync": round(client_s / curl_sync_s, 3),
        "cli_ratio": round(cli_s / curl_s, 3),
        "client_mib_s": round(size_mib / client_s, 1),
        "rounds": {name: [round(t, 3) for t in values] for name, values in timings.items()},
        "peak_rss_kib": {f"{small // MiB} MiB": rss_small, f"{size_mib} MiB": rss_large},
    }


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))
    return ordered[index]


def _burst(http: httpx.Client, clients: int, send: Callable[[], httpx.Response]) -> list[float]:
    barrier = threading.Barrier(clients)
    latencies: list[float] = [0.0] * clients

    def one(index: int) -> None:
        barrier.wait()
        start = time.perf_counter()
        response = send()
        latencies[index] = time.perf_counter() - start
        assert response.status_code in (200, 202), response.text

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def bench_creation(clients: int, rounds: int, work: Path) -> dict[str, Any]:
    from oracle.runner import start_server

    oracle = start_server("bandit")
    config = work / "serve.toml"
    config.write_text(
        f"[openenv]\nmax_tracked_runs = {max(128, clients * rounds)}\n", encoding="utf-8"
    )
    serve = Serve(work / "creation-state", config)
    body = {"environment_urls": [oracle.base_url], "groups": 1, "group_size": 1, "max_steps": 1}
    try:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        with httpx.Client(base_url=serve.url, trust_env=False, timeout=120, limits=limits) as http:
            for _ in range(2):  # warm the connection pool and the routes
                _burst(http, clients, lambda: http.get("/health"))
            health: list[float] = []
            create: list[float] = []
            for _ in range(rounds):
                health += _burst(http, clients, lambda: http.get("/health"))
                create += _burst(http, clients, lambda: http.post("/v1/openenv/runs", json=body))
    finally:
        serve.stop()
        oracle.stop()
    return {
        "clients": clients,
        "requests": len(create),
        "p50_ms": round(_percentile(create, 0.5) * 1000, 2),
        "p99_ms": round(_percentile(create, 0.99) * 1000, 2),
        "health_p50_ms": round(_percentile(health, 0.5) * 1000, 2),
        "health_p99_ms": round(_percentile(health, 0.99) * 1000, 2),
        "p50_ratio": round(_percentile(create, 0.5) / _percentile(health, 0.5), 2),
        "p99_ratio": round(_percentile(create, 0.99) / _percentile(health, 0.99), 2),
    }


def _dead_url() -> str:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def bench_metrics(serve: Serve, tracked: int, scrapes: int) -> dict[str, Any]:
    """Scrape time with exactly ``tracked`` retained runs (they fail fast: nothing listens)."""
    body = {"environment_urls": [_dead_url()], "groups": 1, "group_size": 1}
    with httpx.Client(base_url=serve.url, trust_env=False, timeout=120) as http:
        present = len(http.get("/v1/openenv/runs").json()["runs"])
        for _ in range(tracked - present):
            assert http.post("/v1/openenv/runs", json=body).status_code == 202
        deadline = time.monotonic() + 300
        while any(
            run["state"] not in ("failed", "rollout_ready")
            for run in http.get("/v1/openenv/runs").json()["runs"]
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        listed = len(http.get("/v1/openenv/runs").json()["runs"])

        def median_of(path: str) -> float:
            times = []
            for _ in range(scrapes):
                start = time.perf_counter()
                assert http.get(path).status_code == 200
                times.append(time.perf_counter() - start)
            return statistics.median(times)

        median_of("/metrics")  # warm
        scrape_s = median_of("/metrics")
        floor_s = median_of("/health")
        size = len(http.get("/metrics").content)
    return {
        "tracked_runs": listed,
        "exposition_bytes": size,
        "scrape_ms": round(scrape_s * 1000, 3),
        "health_ms": round(floor_s * 1000, 3),
        "ratio": round(scrape_s / floor_s, 2),
    }


def _download_and_metrics(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One server for both: the published runs, then enough failing runs for ``--tracked``."""
    if not {"download", "metrics"} & args.parts:
        return {}
    state = work / "download-state"
    run_id = _published_run(state, args.size_mib * MiB)
    small_id = _published_run(state, max(1, args.size_mib // 16) * MiB)
    config = work / "download.toml"
    config.write_text(f"[openenv]\nmax_tracked_runs = {args.tracked}\n", encoding="utf-8")
    serve = Serve(state, config)
    out: dict[str, Any] = {}
    try:
        if "download" in args.parts:
            out["download"] = bench_download(
                serve, run_id, small_id, args.size_mib, args.rounds, work
            )
        if "metrics" in args.parts:
            out["metrics"] = bench_metrics(serve, args.tracked, args.scrapes)
    finally:
        serve.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--creation-rounds", type=int, default=4)
    parser.add_argument("--tracked", type=int, default=128)
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument(
        "--only",
        choices=("download", "creation", "metrics"),
        action="append",
        help="run only these parts (repeatable; default: all three)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    parts = set(args.only or ("download", "creation", "metrics"))
    args.parts = parts
    work = Path(tempfile.mkdtemp(prefix="kiln-control-bench-"))
    try:
        report: dict[str, Any] = {
            "benchmark": "control_plane",
            "cpu_count": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            **_download_and_metrics(args, work),
            "self_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        }
        if "creation" in parts:
            report["creation"] = bench_creation(args.clients, args.creation_rounds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2 if args.json else None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
