"""The dashboard's cost with 128 tracked runs (issue 29; docs/performance.md, "Dashboard").

1. **First render.** ``kiln-verify serve`` (its own process) retains ``--runs`` real rollout
   runs, collected from an oracle bandit. A fresh headless Chromium tab opens ``/ui/``; the
   time from navigation start to the run list on screen is the page's own
   ``kiln:runs-rendered`` User Timing mark (set once the first ``GET /v1/openenv/runs`` is
   rendered), and the bytes are the transfer sizes of the page and every request it made
   until then. Median (and best) of ``--loads`` fresh tabs.
2. **Polling.** One page stays open for ``--window`` seconds: the requests it makes per
   minute, and the server process's CPU time (``/proc``: user + system) per poll of the run
   list, with the CPU of the same window with no page open subtracted. The size of one run
   list answer is reported beside it.

    python -m benchmarks.dashboard --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from benchmarks._common import running, start_oracle_process  # noqa: E402
from benchmarks.control_plane import Serve  # noqa: E402
from kiln_verify.testing.browser import Chromium, find_chromium  # noqa: E402

TERMINAL = ("rollout_ready", "failed", "cancelled", "completed")
FIRST_RENDER = """(() => {
  const mark = performance.getEntriesByName("kiln:runs-rendered")[0];
  if (!mark) return null;
  const nav = performance.getEntriesByType("navigation")[0];
  const early = performance.getEntriesByType("resource").filter(r => r.startTime <= mark.startTime);
  return {ms: mark.startTime, cards: document.querySelectorAll("#runs .card").length,
          bytes: nav.transferSize + early.reduce((sum, r) => sum + r.transferSize, 0),
          requests: 1 + early.length};
})()"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fill(url: str, bandit: str, runs: int) -> int:
    body = {"environment_urls": [bandit], "groups": 1, "group_size": 2, "max_steps": 2}
    with httpx.Client(base_url=url, trust_env=False, timeout=120) as http:
        for _ in range(runs):
            assert http.post("/v1/openenv/runs", json=body).status_code == 202
        deadline = time.monotonic() + 600
        while True:
            listed = http.get("/v1/openenv/runs").json()["runs"]
            if all(run["state"] in TERMINAL for run in listed):
                return len(listed)
            assert time.monotonic() < deadline, "runs did not finish"
            time.sleep(0.2)


def bench_first_render(browser: Chromium, url: str, loads: int, runs: int) -> dict[str, Any]:
    samples = []
    for _ in range(loads):
        tab = browser.open(f"{url}/ui/")
        try:
            sample = tab.wait_for(FIRST_RENDER, timeout=60)
        finally:
            tab.close()
        assert sample["cards"] == runs, sample
        samples.append(sample)
    times = [s["ms"] for s in samples]
    return {
        "loads": loads,
        "cards": runs,
        "first_render_ms_median": round(statistics.median(times), 1),
        "first_render_ms_best": round(min(times), 1),
        "bytes_transferred": samples[-1]["bytes"],
        "requests": samples[-1]["requests"],
    }


def bench_polling(browser: Chromium, serve: Serve, window: float) -> dict[str, Any]:
    pid = serve.process.pid
    idle_start = _cpu_seconds(pid)
    time.sleep(window)
    idle = _cpu_seconds(pid) - idle_start
    tab = browser.open(f"{serve.url}/ui/")
    try:
        tab.wait_for("performance.getEntriesByName('kiln:runs-rendered').length > 0", 60)
        tab.events.clear()
        start = _cpu_seconds(pid)
        time.sleep(window)
        busy = _cpu_seconds(pid) - start
        tab.evaluate("0")
    finally:
        visit = tab.close()
    polls = sum(1 for u in visit.requests if u.endswith("/v1/openenv/runs"))
    with httpx.Client(base_url=serve.url, trust_env=False, timeout=60) as http:
        size = len(http.get("/v1/openenv/runs").content)
    return {
        "window_s": window,
        "requests_per_minute": round(len(visit.requests) * 60 / window, 1),
        "run_list_polls_per_minute": round(polls * 60 / window, 1),
        "server_cpu_s_window": round(busy, 3),
        "server_cpu_s_idle_window": round(idle, 3),
        "server_cpu_ms_per_poll": round((busy - idle) * 1000 / max(polls, 1), 2),
        "run_list_bytes": size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=128)
    parser.add_argument("--loads", type=int, default=7)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    executable = find_chromium()
    if executable is None:
        print("no chromium on PATH (Debian: apt-get install -y chromium)", file=sys.stderr)
        return 2
    out: dict[str, Any] = {"load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="kiln-dashboard-bench-") as work:
        config = Path(work, "serve.toml")
        config.write_text(f"[openenv]\nmax_tracked_runs = {args.runs}\n", encoding="utf-8")
        with running(start_oracle_process("bandit")) as bandit:
            serve = Serve(Path(work, "state"), config)
            browser = Chromium(executable)
            try:
                out["tracked_runs"] = _fill(serve.url, bandit.base_url, args.runs)
                out["first_render"] = bench_first_render(browser, serve.url, args.loads, args.runs)
                out["polling"] = bench_polling(browser, serve, args.window)
            finally:
                browser.close()
                serve.stop()
    out["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2) if args.json else out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
