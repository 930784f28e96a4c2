"""The control-plane checks (kiln-openenv-contract §10-§13); each raises ``CheckFailed``.

Every check is black-box: it sends requests and judges status codes, headers and JSON
bodies against the contract, never the implementation. Runs are small (one group of two
candidates, two steps), and a check waits for a run's end only when it judges the result,
so the whole suite takes seconds against a local server.
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import httpx

from kiln_verify.openenv.protocol.urls import verifies_tls
from pytest_kiln.cases.model import CheckFailed
from pytest_kiln.control.context import ControlContext

__all__ = [
    "CONCURRENT_POSTS",
    "check_artifact_headers",
    "check_cancel",
    "check_concurrent_create",
    "check_conflict",
    "check_create",
    "check_error_bodies",
    "check_failure_record",
    "check_key_alphabet",
    "check_list",
    "check_metric_hygiene",
    "check_no_key",
    "check_replay",
    "check_unknown_kind",
]

CONCURRENT_POSTS: Final = 50
UUID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
FAILURE_KEYS: Final = {
    "schema",
    "code",
    "stage",
    "retryable",
    "message",
    "hint",
    "occurred_unix_ms",
    "protocol_code",
    "http_status",
}
METRIC_FAMILIES: Final = (
    "kiln_openenv_runs_total",
    "kiln_openenv_run_failures_total",
    "kiln_openenv_run_queue_wait_seconds_total",
    "kiln_openenv_runs_active",
    "kiln_openenv_runs_queued",
    "kiln_openenv_runs_tracked",
    "kiln_openenv_episodes_collected_total",
    "kiln_openenv_episode_terminations_total",
)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def check_list(ctx: ControlContext) -> str:
    first = ctx.create(ctx.request())
    second = ctx.create(ctx.request())
    response = ctx.http.get("/v1/openenv/runs")
    _expect(response.status_code == 200, f"GET /v1/openenv/runs answered {response.status_code}")
    document = ctx.json(response)
    _expect(
        isinstance(document, dict) and document.get("schema") == "kiln.openenv-run-list.v5",
        "the list is not kiln.openenv-run-list.v5",
    )
    ids = [run.get("run_id") for run in document.get("runs", [])]
    _expect(first["run_id"] in ids and second["run_id"] in ids, "new runs are not listed")
    _expect(
        ids.index(second["run_id"]) < ids.index(first["run_id"]), "the list is not newest first"
    )
    return f"{len(ids)} runs listed"


def check_create(ctx: ControlContext) -> None:
    status = ctx.create(ctx.request(idempotency_key=ctx.key()))
    _expect(status.get("schema") == "kiln.openenv-run.v5", "the status is not kiln.openenv-run.v5")
    _expect(bool(UUID.fullmatch(str(status.get("run_id")))), "run_id is not a lower-case UUID")
    request = status.get("request", {})
    for key, default in (
        ("kind", "rollout"),
        ("adapter", "base"),
        ("seed_start", 0),
        ("max_action_tokens", 256),
    ):
        _expect(
            request.get(key) == default,
            f"the stored request lacks the normalized default {key}={default!r}",
        )
    admission = status.get("admission")
    if not isinstance(admission, dict) or not isinstance(admission.get("sequence"), int):
        raise CheckFailed("the status has no admission sequence")
    if status.get("state") == "queued":
        _expect(
            isinstance(admission.get("queue_position"), int) and admission["queue_position"] >= 1,
            "a queued run has no 1-based position",
        )


def check_replay(ctx: ControlContext) -> str:
    key = ctx.key()
    original = ctx.create(ctx.request(idempotency_key=key))
    again = ctx.http.post("/v1/openenv/runs", json=ctx.request(idempotency_key=key))
    _expect(again.status_code == 200, f"an exact retry answered {again.status_code}, not 200")
    _expect(
        ctx.json(again).get("run_id") == original["run_id"], "an exact retry returned another run"
    )
    # the same meaning spelled differently: alias, explicit default, integer float
    respelled = ctx.request(idempotency_key=key)
    respelled["environments"] = respelled.pop("environment_urls")
    respelled["seed_start"] = 0
    respelled["temperature"] = 1
    by_meaning = ctx.http.post("/v1/openenv/runs", json=respelled)
    _expect(
        by_meaning.status_code == 200,
        f"a retry spelled with an alias and explicit defaults answered "
        f"{by_meaning.status_code}, not 200",
    )
    _expect(
        ctx.json(by_meaning).get("run_id") == original["run_id"],
        "a retry equal by meaning returned another run",
    )
    return "exact and by-meaning retries replay"


def check_conflict(ctx: ControlContext) -> None:
    key = ctx.key()
    ctx.create(ctx.request(idempotency_key=key))
    changed = ctx.http.post("/v1/openenv/runs", json=ctx.request(idempotency_key=key, seed_start=9))
    _expect(changed.status_code == 409, f"a changed request answered {changed.status_code}")
    _expect(
        ctx.error_code(changed) == "openenv_run_idempotency_conflict",
        f"the conflict's code is {ctx.error_code(changed)!r}",
    )


def check_concurrent_create(ctx: ControlContext) -> str:
    body = ctx.request(idempotency_key=ctx.key())
    with httpx.Client(
        base_url=ctx.target.url,
        trust_env=False,
        verify=verifies_tls(ctx.target.url),
        timeout=60.0,
        limits=httpx.Limits(max_connections=CONCURRENT_POSTS),
    ) as http:

        def post(_: int) -> tuple[int, Any]:
            response = http.post("/v1/openenv/runs", json=body)
            return response.status_code, ctx.json(response).get("run_id")

        with ThreadPoolExecutor(CONCURRENT_POSTS) as pool:
            answers = list(pool.map(post, range(CONCURRENT_POSTS)))
    codes = sorted(code for code, _ in answers)
    created = codes.count(202)
    ids = {run_id for _, run_id in answers}
    _expect(
        created == 1 and codes.count(200) == CONCURRENT_POSTS - 1,
        f"{CONCURRENT_POSTS} identical POSTs gave {created} x 202 (codes {set(codes)})",
    )
    _expect(len(ids) == 1, f"{CONCURRENT_POSTS} identical POSTs named {len(ids)} runs")
    return f"{CONCURRENT_POSTS} concurrent POSTs: one 202"


def check_no_key(ctx: ControlContext) -> None:
    first = ctx.create(ctx.request())
    second = ctx.create(ctx.request())
    _expect(first["run_id"] != second["run_id"], "two keyless POSTs returned one run")


def check_key_alphabet(ctx: ControlContext) -> None:
    for bad in ("", "has space", "x" * 129, "secret/slash"):
        response = ctx.http.post("/v1/openenv/runs", json=ctx.request(idempotency_key=bad))
        _expect(
            response.status_code == 400,
            f"idempotency_key {bad[:20]!r} answered {response.status_code}, not 400",
        )
        _expect(
            ctx.error_code(response) == "openenv_invalid_idempotency_key",
            f"idempotency_key {bad[:20]!r} answered code {ctx.error_code(response)!r}",
        )
    ctx.create(ctx.request(idempotency_key="A" * 64 + ".:_-" + "9" * 60))


def check_artifact_headers(ctx: ControlContext) -> str:
    run = ctx.create(ctx.request())
    status = ctx.wait_terminal(run["run_id"])
    _expect(
        status.get("state") in ("rollout_ready", "completed"),
        f"the run ended {status.get('state')}: {status.get('error')}",
    )
    artifacts = status.get("artifacts") or []
    kinds = sorted(item.get("kind") for item in artifacts)
    _expect({"dataset", "replay", "summary"} <= set(kinds), f"the manifest lists {kinds}")
    for item in artifacts:
        url = f"/v1/openenv/runs/{run['run_id']}/artifacts/{item['kind']}"
        _expect(item.get("url") == url, f"the {item['kind']} URL is {item.get('url')!r}")
        response = ctx.http.get(url, headers={"accept-encoding": "identity"})
        headers = response.headers
        _expect(response.status_code == 200, f"{url} answered {response.status_code}")
        _expect(
            headers.get("content-length") == str(item["bytes"]),
            f"{url}: Content-Length {headers.get('content-length')!r}",
        )
        _expect(
            headers.get("etag") == f'"{item["sha256"]}"',
            f"{url}: ETag {headers.get('etag')!r} is not the strong quoted digest",
        )
        directives = {d.strip() for d in headers.get("cache-control", "").split(",")}
        _expect(
            {"private", "no-store"} <= directives,
            f"{url}: Cache-Control {headers.get('cache-control')!r}",
        )
        _expect(headers.get("x-content-type-options") == "nosniff", f"{url}: no nosniff")
        _expect(
            "attachment" in headers.get("content-disposition", ""),
            f"{url}: no attachment Content-Disposition",
        )
        digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
        _expect(
            digest == item["sha256"] and len(response.content) == item["bytes"],
            f"{url}: the body does not match its manifest digest",
        )
    return f"{len(artifacts)} artifacts"


def check_unknown_kind(ctx: ControlContext) -> None:
    run = ctx.create(ctx.request())
    run_id = run["run_id"]
    for kind in ("train_receipt", "no-such-kind", "openenv.rollouts.jsonl", "run.json"):
        response = ctx.http.get(f"/v1/openenv/runs/{run_id}/artifacts/{kind}")
        _expect(response.status_code == 404, f"kind {kind!r} answered {response.status_code}")
        _expect(
            ctx.error_code(response) == "openenv_artifact_not_found",
            f"kind {kind!r} answered code {ctx.error_code(response)!r}",
        )


def check_cancel(ctx: ControlContext) -> str:
    slow = ctx.request(
        environment_urls=[ctx.target.slow_environment_url], groups=4, group_size=2, max_steps=8
    )
    run = ctx.create(slow)
    response = ctx.http.delete(f"/v1/openenv/runs/{run['run_id']}")
    _expect(response.status_code == 200, f"DELETE answered {response.status_code}")
    status = ctx.wait_terminal(run["run_id"])
    _expect(status.get("state") == "cancelled", f"the run ended {status.get('state')}")
    _expect(not status.get("artifacts"), "a cancelled run published artifacts")
    again = ctx.http.delete(f"/v1/openenv/runs/{run['run_id']}")
    _expect(
        again.status_code == 409 and ctx.error_code(again) == "openenv_run_not_cancellable",
        f"cancelling a terminal run answered {again.status_code} {ctx.error_code(again)}",
    )
    missing = ctx.http.delete("/v1/openenv/runs/00000000-0000-4000-8000-000000000000")
    _expect(
        missing.status_code == 404 and ctx.error_code(missing) == "openenv_run_not_found",
        f"cancelling an unknown run answered {missing.status_code}",
    )
    return "cancelled; terminal 409; unknown 404"


def check_failure_record(ctx: ControlContext) -> str:
    run = ctx.create(ctx.request(environment_urls=[ctx.target.dead_environment_url]))
    status = ctx.wait_terminal(run["run_id"])
    _expect(status.get("state") == "failed", f"an unreachable environment ended {status['state']}")
    failure = status.get("failure")
    _expect(isinstance(failure, dict), "a failed run has no failure record")
    assert isinstance(failure, dict)
    _expect(failure.get("schema") == "kiln.openenv-run-failure.v1", "failure schema is wrong")
    _expect(
        set(failure) <= FAILURE_KEYS, f"unknown failure keys {sorted(set(failure) - FAILURE_KEYS)}"
    )
    _expect(
        failure.get("code") == "environment_unavailable",
        f"an unreachable environment is {failure.get('code')!r}",
    )
    _expect(failure.get("stage") == "discovery", f"stage {failure.get('stage')!r}")
    _expect(failure.get("retryable") is True, "an unreachable environment is not retryable")
    _expect(
        "protocol_code" not in failure and "http_status" not in failure,
        "protocol_code/http_status present though the environment sent none",
    )
    message = failure.get("message")
    _expect(isinstance(message, str) and len(message.encode()) <= 4096, "message over 4 KiB")
    _expect(isinstance(failure.get("hint"), str) and bool(failure["hint"]), "no hint")
    _expect(isinstance(status.get("error"), str), "the legacy error projection is missing")
    return f"{failure['code']} at {failure['stage']}"


def check_metric_hygiene(ctx: ControlContext) -> str:
    key = ctx.key()
    run = ctx.create(ctx.request(idempotency_key=key))
    ctx.wait_terminal(run["run_id"])
    response = ctx.http.get("/metrics")
    _expect(response.status_code == 200, f"GET /metrics answered {response.status_code}")
    text = response.text
    missing = [family for family in METRIC_FAMILIES if f"\n{family}" not in "\n" + text]
    _expect(not missing, f"missing metric families {missing}")
    secrets = {
        "a run id": run["run_id"],
        "the idempotency key": key,
        "an environment URL": ctx.target.environment_url,
        "an environment host:port": ctx.target.environment_url.split("://", 1)[1],
        "an environment name": "bandit",
    }
    leaked = [what for what, value in secrets.items() if value.lower() in text.lower()]
    _expect(not leaked, f"/metrics exposes {', '.join(leaked)}")
    return f"{len(text.splitlines())} exposition lines"


def check_error_bodies(ctx: ControlContext) -> None:
    cases = (
        (ctx.http.get("/v1/openenv/runs/00000000-0000-4000-8000-000000000000"), 404),
        (
            ctx.http.post(
                "/v1/openenv/runs", content=b"[1]", headers={"content-type": "application/json"}
            ),
            400,
        ),
        (
            ctx.http.post(
                "/v1/openenv/runs",
                content=b" " * (1024 * 1024 + 1),
                headers={"content-type": "application/json"},
            ),
            413,
        ),
    )
    for response, status in cases:
        _expect(
            response.status_code == status,
            f"{response.request.url.path} answered {response.status_code}, not {status}",
        )
        document = ctx.json(response)
        error = document.get("error") if isinstance(document, dict) else None
        _expect(
            isinstance(error, dict) and {"code", "message", "hint"} <= set(error),
            f"status {status} has no typed error body",
        )
