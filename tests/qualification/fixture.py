"""A throwaway git repository holding a copy of the qualification runner and test workloads.

The runner binds receipts to a clean, committed tree, so every test needs a repository of
its own; copying the real runner files (not a stub) keeps the tests honest about them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RUNNER_FILES = ("qualification/__init__.py", "qualification/run.py")
RUNNER_DIRS = ("qualification/runner", "qualification/schema")
PY = sys.executable


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=q@example.invalid", "-c", "user.name=q", *args],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def commit_all(repo: Path, message: str = "change") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def workload(
    steps: list[dict[str, Any]],
    *,
    variables: dict[str, Any] | None = None,
    evidence: list[dict[str, Any]] | None = None,
    cpu_vars: dict[str, Any] | None = None,
    model: str = "none",
    workload_id: str = "synthetic-v1",
) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "workload_id": workload_id,
        "description": "synthetic workload for the runner's tests",
        "model": model,
        "term_grace_seconds": 0.5,
        "variables": variables or {},
        "variants": {
            "cpu": {"description": "cpu", "device": "cpu", "variables": cpu_vars or {}},
            "cuda": {"description": "cuda", "device": "cuda", "variables": {}},
        },
        "steps": steps,
        "evidence": {"required_metrics": evidence or []},
    }


def step(step_id: str, code: str, *args: Any, **extra: Any) -> dict[str, Any]:
    """A step running ``python -c CODE ARGS...`` with the test's own interpreter."""
    body: dict[str, Any] = {"id": step_id, "argv": [PY, "-c", code, *args]}
    body.update({"timeout_seconds": 30, "network": "host"})
    body.update(extra)
    return body


def metric_code(name: str, value_expr: str) -> str:
    return (
        "import json; print('KILN_QUALIFICATION_METRIC ' + "
        f"json.dumps({{'name': {name!r}, 'value': {value_expr}}}))"
    )


def make_repo(root: Path, workloads: dict[str, dict[str, Any]]) -> Path:
    repo = root / "repo"
    (repo / "qualification" / "workloads").mkdir(parents=True)
    for name in RUNNER_FILES:
        shutil.copy2(REPO / name, repo / name)
    for name in RUNNER_DIRS:
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / ".gitignore").write_text(".qualification/\n__pycache__/\n")
    (repo / "README.md").write_text("fixture\n")
    for name, data in workloads.items():
        (repo / "qualification" / "workloads" / f"{name}.json").write_text(json.dumps(data))
    git(repo, "init", "-q")
    commit_all(repo, "fixture")
    return repo


def run(repo: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "qualification/run.py", *args], cwd=repo, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def qualify(repo: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run(repo, f"qualification/workloads/{name}.json", "--variant", "cpu",
               "--host-id", "test-host", *extra)  # fmt: skip


def only_receipt(repo: Path) -> tuple[Path, dict[str, Any]]:
    found = sorted((repo / "qualification" / "receipts").rglob("*.json"))
    assert len(found) == 1, found
    data: dict[str, Any] = json.loads(found[0].read_text())
    return found[0], data


def step_record(receipt: dict[str, Any], step_id: str) -> dict[str, Any]:
    matches = [s for s in receipt["steps"] if s["id"] == step_id]
    assert len(matches) == 1
    found: dict[str, Any] = matches[0]
    return found
