"""One qualification run: preflight (nothing is created until it passes), steps, receipt.

Preflight order: ids -> clean tree -> commit -> workload (location, committed bytes, schema)
-> variant and variables -> model -> tree hash -> versions, accelerator, isolation probe ->
clean tree and commit again. Afterwards the tree must still be clean at the same commit and
a given model unchanged, or the run fails.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import gitstate, hostinfo, isolation, receipt
from .common import Refusal, check_id, utc_now, utc_text
from .execute import run_step
from .model import model_identity
from .plan import judge_evidence, step_failure, step_plans, unrun_record
from .workload import Scalar, expand, load_workload, resolve_variables


@dataclass
class Request:
    workload: str
    variant: str
    host_id: str
    model: str | None = None
    model_id: str | None = None
    variables: list[str] = field(default_factory=list)
    receipt_id: str | None = None
    command: list[str] = field(default_factory=list)


def qualify(request: Request, repo: Path) -> tuple[Path, dict[str, Any]]:
    host_id = check_id("host-id", request.host_id)
    if request.receipt_id is not None:
        check_id("receipt-id", request.receipt_id)
    gitstate.require_clean(repo)
    commit = gitstate.head_commit(repo)
    workload = load_workload(repo, request.workload, commit)
    variants = workload.data["variants"]
    if request.variant not in variants:
        raise Refusal(
            "variant-unknown",
            f"workload {workload.workload_id} has no variant {request.variant!r}",
            f"use one of: {', '.join(sorted(variants))}",
        )
    device: str = variants[request.variant]["device"]
    variables = resolve_variables(workload, request.variant, request.variables)
    given_model = _model_request(workload.data["model"], request)
    tree, tree_files = gitstate.tree_hash(repo, commit)
    model_before = model_identity(given_model) if given_model else None
    started = utc_now()
    clock = time.monotonic()
    receipt_id = request.receipt_id or _receipt_id(
        started, request.variant, host_id, workload.workload_id
    )
    run_rel = f".qualification/runs/{receipt_id}"
    run_dir = repo / run_rel
    target = repo / "qualification" / "receipts" / request.variant / host_id / f"{receipt_id}.json"
    for taken in (run_dir, target):
        if taken.exists() or taken.is_symlink():
            raise Refusal(
                "receipt-id-taken", f"{taken} already exists", "choose another --receipt-id"
            )
    work_dir = run_dir / "work"
    model_path = given_model or (
        work_dir / "model" if workload.data["model"] == "optional" else None
    )
    values: dict[str, Scalar] = {
        **variables, "repo": str(repo), "run_dir": str(run_dir), "work_dir": str(work_dir),
        "model_path": str(model_path or ""), "model_id": request.model_id or "",
        "variant": request.variant, "device": device, "runner_python": sys.executable,
    }  # fmt: skip
    python_info, packages = hostinfo.python_info(
        expand(workload.data.get("python", "${runner_python}"), values), repo
    )
    accel = hostinfo.accelerator(python_info["executable"], repo)
    if device == "cuda" and accel["kind"] != "cuda":
        raise Refusal("device-missing", "variant needs an NVIDIA GPU and none was found", "use cpu")
    net = isolation.probe()
    gitstate.require_clean(repo)
    if gitstate.head_commit(repo) != commit:
        raise Refusal("commit-moved", "HEAD moved during preflight", "run again")

    work_dir.mkdir(parents=True)
    grace = float(workload.data.get("term_grace_seconds", 10))
    runner_env = {
        "KILN_QUALIFICATION_VARIANT": request.variant, "KILN_QUALIFICATION_DEVICE": device,
        "KILN_QUALIFICATION_WORK_DIR": str(work_dir),
    }  # fmt: skip
    steps: list[dict[str, Any]] = []
    failures: list[str] = []
    for plan, only_without_model in step_plans(workload, values):
        if failures:
            steps.append(unrun_record(plan, "not_run"))
        elif only_without_model and given_model is not None:
            steps.append(unrun_record(plan, "skipped"))
        else:
            record = run_step(plan, repo, run_rel, net, grace, runner_env)
            steps.append(record)
            if (failure := step_failure(record, plan)) is not None:
                failures.append(failure)
            print(
                f"[{record['status']}] {plan.step_id} ({record['duration_seconds']:.1f} s)",
                file=sys.stderr,
            )
    evidence = judge_evidence(workload, steps)
    failures += [
        f"evidence: {item['step']}/{item['name']} = {item['observed']!r} fails {item['rule']}"
        for item in evidence if not item["passed"]
    ]  # fmt: skip
    clean_at_end = not gitstate.dirty_paths(repo)
    commit_at_end = gitstate.head_commit(repo)
    if not clean_at_end:
        failures.append("the working tree is no longer clean after the run")
    if commit_at_end != commit:
        failures.append(f"HEAD moved during the run ({commit} -> {commit_at_end})")
    model = _model_after(model_before, given_model, model_path, request.model_id, failures)
    finished = utc_now()
    record = receipt.seal({
        "schema_version": 1, "receipt_id": receipt_id, "host_id": host_id,
        "variant": request.variant, "device": device,
        "verdict": "fail" if failures else "pass", "failures": failures,
        "started_at_utc": utc_text(started), "finished_at_utc": utc_text(finished),
        "duration_seconds": round(time.monotonic() - clock, 6), "command": request.command,
        "source": {
            "git_commit": commit, "tree_hash_format": gitstate.TREE_HASH_FORMAT,
            "tree_hash": tree, "tree_files": tree_files, "clean_at_start": True,
            "clean_at_end": clean_at_end, "commit_at_end": commit_at_end,
        },
        "workload": {
            "id": workload.workload_id, "path": workload.relpath, "sha256": workload.sha256,
        },
        "variables": variables, "model": model,
        "environment": {
            "os": hostinfo.os_info(), "python": python_info, "packages": packages,
            "accelerator": accel,
        },
        "isolation": {"available": net.available, "mechanism": net.mechanism, "probe": net.probe},
        "steps": steps, "evidence": evidence,
    })  # fmt: skip
    path = receipt.receipt_path(repo, record)
    receipt.write(path, record)
    return path, record


def _receipt_id(started: Any, variant: str, host: str, workload_id: str) -> str:
    stamp = started.strftime("%Y%m%dt%H%M%S%fz")
    made = f"{stamp}-{variant[:32]}-{host[:32]}-{workload_id[:32]}".replace("_", "-")
    return check_id("receipt-id", made)


def _model_request(policy: str, request: Request) -> Path | None:
    if request.model_id is not None:
        if request.model is None:
            raise Refusal("model-id", "--model-id needs --model", "pass --model DIR too")
        if not (1 <= len(request.model_id) <= 256) or not request.model_id.isprintable():
            raise Refusal("model-id", "--model-id must be 1..256 printable characters", "fix it")
    if request.model is None:
        if policy == "required":
            raise Refusal("model-missing", "this workload needs --model DIR", "pass --model")
        return None
    if policy == "none":
        raise Refusal("model-unused", "this workload takes no model", "drop --model")
    return Path(request.model).absolute()


def _model_after(
    before: dict[str, Any] | None, given: Path | None, path: Path | None, model_id: str | None,
    failures: list[str],
) -> dict[str, Any] | None:  # fmt: skip
    if given is not None and before is not None:
        try:
            unchanged = model_identity(given) == before
        except Refusal:
            unchanged = False
        if not unchanged:
            failures.append("the model directory changed during the run")
        return {
            "source": "given",
            "model_id": model_id,
            "path": str(given),
            **before,
            "unchanged": unchanged,
        }
    if path is None:
        return None
    if not path.is_dir():
        if not failures:
            failures.append(f"no step built the model at {path}")
        return None
    try:
        built = model_identity(path)
    except Refusal as error:
        failures.append(f"built model: {error}")
        return None
    return {"source": "built", "model_id": None, "path": str(path), **built, "unchanged": None}
