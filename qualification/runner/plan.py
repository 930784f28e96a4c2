"""Turning a resolved workload into step plans, and judging the evidence afterwards."""

from __future__ import annotations

from typing import Any

from .execute import StepPlan
from .workload import Scalar, Workload, expand, expand_argv


def step_plans(workload: Workload, values: dict[str, Scalar]) -> list[tuple[StepPlan, bool]]:
    """(plan, only_without_model) per step, placeholders expanded."""
    plans = []
    for index, step in enumerate(workload.data["steps"]):
        plan = StepPlan(
            index=index,
            step_id=step["id"],
            argv=expand_argv(step["argv"], values),
            env={key: expand(text, values) for key, text in sorted(step.get("env", {}).items())},
            timeout=float(step["timeout_seconds"]),
            network=step["network"],
            expected_exit_codes=tuple(step.get("expected_exit_codes", [0])),
        )
        plans.append((plan, bool(step.get("only_without_model", False))))
    return plans


def unrun_record(plan: StepPlan, status: str) -> dict[str, Any]:
    return {
        "id": plan.step_id, "status": status, "argv": plan.argv, "env": plan.env,
        "network": plan.network, "isolation_enforced": False, "exit_code": None, "signal": None,
        "timed_out": False, "killed": False, "started_at_utc": None, "duration_seconds": None,
        "stdout": None, "stderr": None, "metrics": [], "metric_errors": [],
    }  # fmt: skip


def step_failure(record: dict[str, Any], plan: StepPlan) -> str | None:
    if record["status"] in ("passed", "skipped"):
        return None
    if record["timed_out"]:
        how = "killed" if record["killed"] else "terminated"
        return f"step {plan.step_id}: timed out after {plan.timeout:g} s ({how})"
    if record["metric_errors"]:
        return f"step {plan.step_id}: bad metric output: {record['metric_errors'][0]}"
    got = record["exit_code"] if record["exit_code"] is not None else record["signal"]
    return f"step {plan.step_id}: exit {got} (expected {list(plan.expected_exit_codes)})"


def judge_evidence(workload: Workload, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_step = {step["id"]: {m["name"]: m["value"] for m in step["metrics"]} for step in steps}
    results = []
    for rule in workload.data["evidence"]["required_metrics"]:
        metrics = by_step.get(rule["step"], {})
        present = rule["name"] in metrics
        observed = metrics.get(rule["name"])
        passed = present and _satisfies(observed, rule)
        results.append({
            "step": rule["step"], "name": rule["name"],
            "rule": {k: v for k, v in rule.items() if k not in ("step", "name")},
            "observed": observed, "passed": passed,
        })  # fmt: skip
    return results


def _satisfies(value: Any, rule: dict[str, Any]) -> bool:
    if "equals" in rule:
        expected = rule["equals"]
        if type(value) is not type(expected) and not (_number(value) and _number(expected)):
            return False
        if value != expected:
            return False
    if "min" in rule and not (_number(value) and value >= rule["min"]):
        return False
    return not ("max" in rule and not (_number(value) and value <= rule["max"]))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
