"""The training-admission checks (kiln-openenv-contract §5.8, §12; docs/training-admission.md).

Black-box like the others: they judge what ``POST /v1/openenv/training/preflight`` answers
and that a refusal leaves the server as it was. A server that holds no resident model
cannot admit training at all; it must say so with ``model_not_loaded`` (409), and the
checks that need admission are then not applicable rather than failed.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

import httpx

from pytest_kiln.cases.model import CheckFailed, NotApplicable
from pytest_kiln.control.context import ControlContext

__all__ = [
    "PREFLIGHT",
    "check_preflight_receipt",
    "check_preflight_refusals",
    "check_rollout_refuses_training_fields",
    "check_train_run",
]

PREFLIGHT: Final = "/v1/openenv/training/preflight"
RECEIPT_SCHEMA: Final = "kiln.openenv-training-preflight.v1"
CAPACITY_KEYS: Final = (
    "checked_unix_ms",
    "queued_jobs",
    "max_queued_jobs",
    "tracked_jobs",
    "max_tracked_jobs",
)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def _adapter_name() -> str:
    return f"kiln-conformance-{uuid.uuid4().hex[:12]}"


def _preflight(ctx: ControlContext, body: dict[str, Any]) -> httpx.Response:
    response = ctx.http.post(PREFLIGHT, json=body)
    if response.status_code == 409 and ctx.error_code(response) == "model_not_loaded":
        raise NotApplicable("the server holds no resident model (409 model_not_loaded)")
    return response


def _run_count(ctx: ControlContext) -> int:
    listing = ctx.json(ctx.http.get("/v1/openenv/runs"))
    runs = listing.get("runs") if isinstance(listing, dict) else None
    _expect(isinstance(runs, list), "GET /v1/openenv/runs has no runs array")
    assert isinstance(runs, list)
    return len(runs)


def check_preflight_receipt(ctx: ControlContext) -> str:
    output = _adapter_name()
    response = _preflight(ctx, {"output_adapter": output, "auto_load": False})
    _expect(
        response.status_code == 200,
        f"a plain preflight answered {response.status_code}: {response.text[:200]}",
    )
    receipt = ctx.json(response)
    _expect(isinstance(receipt, dict), "the receipt is not a JSON object")
    _expect(receipt.get("schema") == RECEIPT_SCHEMA, f"receipt schema {receipt.get('schema')!r}")
    _expect(receipt.get("capacity_reserved") is False, "a preflight claims to reserve capacity")
    config = receipt.get("effective_config")
    _expect(isinstance(config, dict), "the receipt has no effective_config object")
    owned = {
        "output_name": output,
        "auto_load": False,
        "behavior_policy": "no_importance_correction",
        "base_adapter": None,
    }
    for field, expected in owned.items():
        _expect(
            config.get(field) == expected,
            f"effective_config.{field} is {config.get(field)!r}, not the Kiln-owned {expected!r}",
        )
    _expect("post_eval" not in receipt, "the receipt carries a post_eval nobody asked for")
    _expect(isinstance(receipt.get("behavior_policy"), dict), "no behaviour-policy identity")
    capacity = receipt.get("capacity")
    _expect(isinstance(capacity, dict), "the receipt has no capacity snapshot")
    for key in CAPACITY_KEYS:
        value = capacity.get(key)
        _expect(
            isinstance(value, int) and not isinstance(value, bool) and value >= 0,
            f"capacity.{key} is {value!r}, not a count",
        )
    _expect(
        capacity["queued_jobs"] <= capacity["max_queued_jobs"],
        "capacity.queued_jobs exceeds max_queued_jobs",
    )
    return f"effective_config of {len(config)} fields"


def _refusals() -> list[tuple[str, dict[str, Any], str]]:
    """(what is wrong, the request, the code its refusal must carry); fresh names each time,
    so no refusal can be explained by an adapter an earlier case left behind."""
    fresh = _adapter_name()
    return [
        # the preflight request's schema requires the field: a request-shape refusal
        ("no output adapter", {}, "openenv_invalid_request"),
        ("an adapter training itself", {"adapter": fresh, "output_adapter": fresh},
         "openenv_training_request_invalid"),
        ("an output adapter name outside the rules", {"output_adapter": "../escape"},
         "adapter_name_invalid"),
        ("an unknown GrpoConfig field",
         {"output_adapter": fresh, "training_config": {"no_such_knob": 1}},
         "openenv_training_config_unsupported"),
        ("Kiln's static post_eval suites",
         {"output_adapter": fresh, "post_eval": {"suite": "smoke"}},
         "openenv_post_eval_unsupported"),
    ]  # fmt: skip


def check_preflight_refusals(ctx: ControlContext) -> str:
    # a server without a resident model refuses everything with model_not_loaded: ask once
    _preflight(ctx, {"output_adapter": _adapter_name()})
    before = _run_count(ctx)
    refusals = _refusals()
    for what, body, code in refusals:
        response = ctx.http.post(PREFLIGHT, json=body)
        _expect(
            400 <= response.status_code < 600 and response.status_code != 500,
            f"{what}: answered {response.status_code}",
        )
        _expect(
            ctx.error_code(response) == code,
            f"{what}: answered code {ctx.error_code(response)!r}, expected {code!r}",
        )
    _expect(_run_count(ctx) == before, "a refused preflight created a run")
    return f"{len(refusals)} refusals, no run created"


def check_rollout_refuses_training_fields(ctx: ControlContext) -> str:
    before = _run_count(ctx)
    for field, value in (
        ("output_adapter", _adapter_name()),
        ("training_config", {"lora_rank": 2}),
        ("environment_eval", {"groups": 20}),
    ):
        response = ctx.http.post("/v1/openenv/runs", json=ctx.request(**{field: value}))
        _expect(
            response.status_code == 400 and ctx.error_code(response) == "openenv_invalid_request",
            f"a rollout request with {field} answered {response.status_code} "
            f"{ctx.error_code(response)!r}, not 400 openenv_invalid_request",
        )
    _expect(_run_count(ctx) == before, "a refused rollout request created a run")
    return "3 training fields refused"


#: The train run a case starts: the smallest that collects, one step per episode, short
#: replies (a model that cannot act yet still completes: §5.7 then selects nothing).
TRAIN_RUN: Final = {
    "groups": 2,
    "group_size": 2,
    "max_steps": 1,
    "max_action_tokens": 8,
    "thinking": False,
    "concurrency": 1,
    "training_config": {"lora_rank": 2},
}
TRAIN_RUN_TIMEOUT_S: Final = 300.0
TRAINING_ARTIFACTS: Final = ("train_receipt", "adapter_manifest")


def check_train_run(ctx: ControlContext) -> str:
    output = _adapter_name()
    body = ctx.request(kind="train", output_adapter=output, **TRAIN_RUN)
    response = ctx.http.post("/v1/openenv/runs", json=body)
    if response.status_code == 409 and ctx.error_code(response) == "model_not_loaded":
        raise NotApplicable("the server holds no resident model (409 model_not_loaded)")
    _expect(response.status_code == 202, f"a train run answered {response.status_code}")
    run = ctx.json(response)
    _expect(run.get("kind") == "train", f"the run's kind is {run.get('kind')!r}")
    contract = run.get("training_contract")
    _expect(isinstance(contract, dict), "a train run's first status carries no training_contract")
    _expect(
        contract.get("schema") == "kiln.openenv-training-contract.v1",
        f"training_contract schema {contract.get('schema')!r}",
    )
    _expect(
        contract.get("effective_config", {}).get("output_name") == output,
        "the sealed contract's output_name is not the output adapter",
    )
    status = ctx.wait_terminal(run["run_id"], timeout=TRAIN_RUN_TIMEOUT_S)
    _expect(status.get("state") == "completed", f"the train run ended {status.get('state')}")
    _expect(status.get("training_contract") == contract, "the sealed contract changed")
    kinds = [item.get("kind") for item in status.get("artifacts") or []]
    _expect(kinds[:3] == ["dataset", "replay", "summary"], f"artifacts {kinds}")
    training = status.get("training")
    if training is None:  # §5.7 kept no group: no trainer, and a warning says so
        _expect(bool(status.get("warnings")), "no trainer ran and no warning says why")
        _expect(not set(TRAINING_ARTIFACTS) & set(kinds), "evidence without a trainer")
        return "completed; selection kept no group, no trainer"
    _expect(training.get("state") == "completed", f"training ended {training.get('state')}")
    for kind in TRAINING_ARTIFACTS:
        _expect(kind in kinds, f"a trained run publishes no {kind}")
    lineage = (training.get("training_data") or {}).get("openenv")
    _expect(isinstance(lineage, dict), "training.training_data.openenv carries no lineage")
    assert isinstance(lineage, dict)
    _expect(
        str(lineage.get("group_plan_sha256", "")).startswith("sha256:"),
        "the lineage has no group_plan_sha256",
    )
    return f"completed; trained, {len(kinds)} artifacts"
