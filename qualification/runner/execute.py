"""Running one step: no shell, its own process group, a timeout, logs and metrics.

A step reports metrics by printing lines ``KILN_QUALIFICATION_METRIC {"name": ..., "value":
..., "unit": ...}`` on stdout (``unit`` optional, value a JSON scalar or null). Anything else
it prints is only logged. Logs go to ``.qualification/runs/<receipt>/steps/NN-<id>/`` (ignored
by git); the receipt keeps their size and SHA-256 so they stay attributable.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import sha256_file, strict_json, utc_now, utc_text
from .isolation import Isolation

METRIC_PREFIX = "KILN_QUALIFICATION_METRIC "
METRIC_NAME = re.compile(r"[a-z][a-z0-9_.]{0,127}")
MAX_METRICS = 256
#: Inherited from the runner's environment; everything else is dropped so that a step sees
#: the same environment on every host except for these paths, locale and device selectors.
BASE_ENV = (
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "USER", "LOGNAME", "SHELL",
    "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
)  # fmt: skip


@dataclass(frozen=True)
class StepPlan:
    index: int
    step_id: str
    argv: list[str]
    env: dict[str, str]
    timeout: float
    network: str
    expected_exit_codes: tuple[int, ...]


def step_env(plan: StepPlan, runner_env: dict[str, str]) -> dict[str, str]:
    env = {key: os.environ[key] for key in BASE_ENV if key in os.environ}
    env.update(plan.env)
    env.update(runner_env)
    return env


def run_step(
    plan: StepPlan, repo: Path, run_rel: str, isolation: Isolation, grace: float,
    runner_env: dict[str, str],
) -> dict[str, Any]:  # fmt: skip
    step_rel = f"{run_rel}/steps/{plan.index:02d}-{plan.step_id}"
    step_dir = repo / step_rel
    step_dir.mkdir(parents=True)
    enforced = plan.network == "none" and isolation.available
    argv = isolation.wrap(plan.argv) if enforced else plan.argv
    env = step_env(plan, {**runner_env, "KILN_QUALIFICATION_STEP_DIR": str(step_dir)})
    started = utc_now()
    clock = time.monotonic()
    timed_out = killed = False
    code: int | None = None
    with (step_dir / "stdout.log").open("wb") as out, (step_dir / "stderr.log").open("wb") as err:
        try:
            process = subprocess.Popen(
                argv, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True,
            )  # fmt: skip
        except OSError as error:
            err.write(f"qualification runner: cannot start {plan.argv[0]!r}: {error}\n".encode())
        else:
            try:
                code = process.wait(timeout=plan.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                killed = _terminate(process, grace)
                code = process.returncode
            _reap_group(process.pid)
    duration = time.monotonic() - clock
    metrics, errors = parse_metrics(step_dir / "stdout.log")
    exit_code = code if code is not None and code >= 0 else None
    sig = signal.Signals(-code).name if code is not None and code < 0 else None
    if timed_out:
        status = "timed_out"
    elif exit_code in plan.expected_exit_codes and not errors:
        status = "passed"
    else:
        status = "failed"
    return {
        "id": plan.step_id,
        "status": status,
        "argv": plan.argv,
        "env": plan.env,
        "network": plan.network,
        "isolation_enforced": enforced,
        "exit_code": exit_code,
        "signal": sig,
        "timed_out": timed_out,
        "killed": killed,
        "started_at_utc": utc_text(started),
        "duration_seconds": round(duration, 6),
        "stdout": _log(repo, f"{step_rel}/stdout.log"),
        "stderr": _log(repo, f"{step_rel}/stderr.log"),
        "metrics": metrics,
        "metric_errors": errors,
    }


def _terminate(process: subprocess.Popen[bytes], grace: float) -> bool:
    """SIGTERM to the whole group, then SIGKILL after ``grace`` seconds; True if killed."""
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
        return False
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
        return True


def _reap_group(pgid: int) -> None:
    """Nothing a step started may outlive it (a daemon left behind would skew the next step)."""
    _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _log(repo: Path, rel: str) -> dict[str, Any]:
    digest, size = sha256_file(repo / rel)
    return {"path": rel, "bytes": size, "sha256": digest}


def parse_metrics(stdout: Path) -> tuple[list[dict[str, Any]], list[str]]:
    metrics: list[dict[str, Any]] = []
    errors: list[str] = []
    seen: set[str] = set()
    with stdout.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.startswith(METRIC_PREFIX):
                continue
            problem = _metric(line[len(METRIC_PREFIX) :], seen, metrics)
            if problem is not None:
                errors.append(f"stdout line {number}: {problem}"[:1024])
            if len(metrics) > MAX_METRICS:
                errors.append(f"more than {MAX_METRICS} metrics")
                break
    return metrics, errors


def _metric(text: str, seen: set[str], metrics: list[dict[str, Any]]) -> str | None:
    try:
        item = strict_json(text.encode())
    except (ValueError, UnicodeDecodeError) as error:
        return f"metric is not strict JSON: {error}"
    if not isinstance(item, dict) or not {"name", "value"} <= set(item) <= {
        "name",
        "value",
        "unit",
    }:
        return "a metric is an object with name, value and optional unit"
    name, value, unit = item["name"], item["value"], item.get("unit")
    if not isinstance(name, str) or METRIC_NAME.fullmatch(name) is None:
        return f"bad metric name {name!r}"
    if name in seen:
        return f"metric {name!r} reported twice"
    if value is not None and not isinstance(value, str | int | float | bool):
        return f"metric {name!r}: value must be a JSON scalar or null"
    if unit is not None and (not isinstance(unit, str) or len(unit) > 64):
        return f"metric {name!r}: unit must be a short string"
    seen.add(name)
    metrics.append({"name": name, "value": value, **({"unit": unit} if unit is not None else {})})
    return None
