"""The §12 routes over real sockets: creation, replay, conflicts, bounds, typed errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.limits import MAX_CONTROL_REQUEST_BYTES
from oracle.runner import ServerConfig, start_server
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import control_server, small_request, wait_terminal


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server that only ever refuses in these tests (shared: starting one costs time)."""
    with (
        control_server(tmp_path_factory.mktemp("refusing")) as server,
        httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
    ):
        yield http


def _code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "hint"}
    return str(body["error"]["code"])


def test_new_request_202_exact_retry_200_changed_409(
    http: httpx.Client, bandit: OracleHandle
) -> None:
    body = small_request(bandit.base_url, idempotency_key="exp:1")
    created = http.post("/v1/openenv/runs", json=body)
    assert created.status_code == 202
    run_id = created.json()["run_id"]
    retry = http.post("/v1/openenv/runs", json=body)
    assert retry.status_code == 200
    assert retry.json()["run_id"] == run_id
    changed = http.post("/v1/openenv/runs", json={**body, "max_steps": 3})
    assert changed.status_code == 409
    assert _code(changed) == "openenv_run_idempotency_conflict"
    status = wait_terminal(http, run_id)
    assert status["state"] == "rollout_ready"
    after = http.post("/v1/openenv/runs", json=body)  # terminal and retained: still replays
    assert after.status_code == 200
    assert after.json()["state"] == "rollout_ready"
    metrics = http.get("/metrics").text
    assert 'kiln_openenv_runs_total{status="idempotent_replay"} 2.0' in metrics
    assert 'kiln_openenv_runs_total{status="started"} 1.0' in metrics


def test_retry_compares_the_normalized_request(http: httpx.Client, bandit: OracleHandle) -> None:
    first = http.post(
        "/v1/openenv/runs",
        json={"environment_urls": [bandit.base_url], "idempotency_key": "k", "groups": 1},
    )
    assert first.status_code == 202
    same = {
        "environments": [bandit.base_url + "/"],  # alias, trailing slash
        "idempotency_key": "k",
        "groups": 1,
        "group_size": 4,  # explicit defaults
        "kind": "rollout",
        "temperature": 1,  # integer spelling of 1.0
        "adapter": "NONE",  # base/none/null mean the base policy
        "credential_ids": [],
        "reset_options": {},
    }
    again = http.post("/v1/openenv/runs", json=same)
    assert again.status_code == 200, again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    stored = again.json()["request"]
    assert stored["environment_urls"] == [bandit.base_url]
    assert "environments" not in stored
    assert "credential_ids" not in stored
    assert stored["adapter"] == "base"
    wait_terminal(http, first.json()["run_id"])


def test_no_key_always_creates(http: httpx.Client, bandit: OracleHandle) -> None:
    body = small_request(bandit.base_url)
    ids = {http.post("/v1/openenv/runs", json=body).json()["run_id"] for _ in range(3)}
    assert len(ids) == 3
    for run_id in ids:
        wait_terminal(http, run_id)


def test_fifty_concurrent_identical_posts_create_one_run(server: Any, bandit: OracleHandle) -> None:
    body = small_request(bandit.base_url, idempotency_key="burst")
    with httpx.Client(
        base_url=server.base_url,
        trust_env=False,
        timeout=60,
        limits=httpx.Limits(max_connections=50, max_keepalive_connections=50),
    ) as http:
        with ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(lambda _: http.post("/v1/openenv/runs", json=body), range(50)))
        codes = [answer.status_code for answer in answers]
        assert codes.count(202) == 1
        assert codes.count(200) == 49
        assert len({answer.json()["run_id"] for answer in answers}) == 1
        listing = http.get("/v1/openenv/runs").json()
        assert len(listing["runs"]) == 1
        wait_terminal(http, answers[0].json()["run_id"])


def test_body_bound_and_strict_json(http: httpx.Client, bandit: OracleHandle) -> None:
    body = json.dumps(small_request(bandit.base_url)).encode()
    padded = body[:-1] + b" " * (MAX_CONTROL_REQUEST_BYTES - len(body)) + b"}"
    assert len(padded) == MAX_CONTROL_REQUEST_BYTES
    accepted = http.post("/v1/openenv/runs", content=padded)
    assert accepted.status_code == 202  # the last accepted size
    over = http.post("/v1/openenv/runs", content=padded + b" ")
    assert over.status_code == 413
    assert _code(over) == "openenv_request_too_large"
    chunked = http.post("/v1/openenv/runs", content=iter([padded, b" "]))  # no Content-Length
    assert chunked.status_code == 413
    for bad in (
        b'{"environment_urls": ["x"], "groups": 1, "groups": 2}',
        b"[1]",
        b"{",
        b'{"environment_urls": ["http://127.0.0.1:1"], "temperature": NaN}',
    ):
        refused = http.post("/v1/openenv/runs", content=bad)
        assert refused.status_code == 400, bad
        assert _code(refused) == "openenv_invalid_request"
    wait_terminal(http, accepted.json()["run_id"])


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"idempotency_key": "x" * 129}, 400, "openenv_invalid_idempotency_key"),
        ({"idempotency_key": "no spaces"}, 400, "openenv_invalid_idempotency_key"),
        ({"idempotency_key": ""}, 400, "openenv_invalid_idempotency_key"),
        ({"environment_urls": ["ftp://127.0.0.1:1"]}, 400, "openenv_invalid_url"),
        ({"environment_urls": ["http://u:p@127.0.0.1:1"]}, 400, "openenv_invalid_url"),
        ({"environment_urls": ["http://example.com"]}, 403, "openenv_remote_environment_forbidden"),
        ({"credential_ids": ["nope"]}, 400, "openenv_invalid_credential"),
        ({"credential_ids": ["a", "b"]}, 400, "openenv_invalid_request"),
        ({"adapter": "lora-7"}, 400, "openenv_adapter_unknown"),
        ({"groups": 0}, 400, "openenv_invalid_request"),
        ({"groups": 16385}, 400, "openenv_invalid_request"),
        ({"max_steps": 257}, 400, "openenv_invalid_request"),
        ({"thinking_budget_tokens": 256}, 400, "openenv_invalid_request"),
        ({"surprise": 1}, 400, "openenv_invalid_request"),
        ({"environment_reset_options": [{}, {}]}, 400, "openenv_invalid_request"),
        ({"output_adapter": "x"}, 400, "openenv_invalid_request"),
        # no resident model: what is missing first (docs/resident-model.md)
        ({"kind": "train", "output_adapter": "x"}, 409, "model_not_loaded"),
        ({"kind": "evaluate"}, 400, "openenv_invalid_request"),
    ],
)
def test_refusals_are_typed(
    refusing: httpx.Client, bandit: OracleHandle, fields: dict[str, Any], status: int, code: str
) -> None:
    answer = refusing.post("/v1/openenv/runs", json=small_request(bandit.base_url, **fields))
    assert answer.status_code == status, answer.text
    assert _code(answer) == code
    assert refusing.get("/v1/openenv/runs").json()["runs"] == []  # nothing was created


def test_the_key_boundary(http: httpx.Client, bandit: OracleHandle) -> None:
    longest = "A1._:-" * 21 + "zz"
    assert len(longest) == 128
    created = http.post(
        "/v1/openenv/runs", json=small_request(bandit.base_url, idempotency_key=longest)
    )
    assert created.status_code == 202
    wait_terminal(http, created.json()["run_id"])


def test_routes_answer_typed_404_405_and_openapi(http: httpx.Client) -> None:
    assert _code(http.get("/v1/openenv/runs/00000000-0000-4000-8000-000000000000")) == (
        "openenv_run_not_found"
    )
    assert _code(http.get("/v1/openenv/runs/../../etc")) in (
        "openenv_route_not_found",
        "openenv_run_not_found",
    )
    assert _code(http.get("/v1/openenv/runs/not-a-run")) == "openenv_run_not_found"
    assert _code(http.put("/v1/openenv/runs")) == "openenv_method_not_allowed"
    assert _code(http.get("/nowhere")) == "openenv_route_not_found"
    document = http.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    for name in (
        "OpenEnvRunRequest",
        "OpenEnvRunStatus",
        "RunList",
        "RunFailure",
        "InspectRequest",
        "InspectResponse",
        "TaskCatalogRequest",
        "ApiErrorBody",
    ):
        assert name in schemas, name
    post = document["paths"]["/v1/openenv/runs"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/OpenEnvRunRequest"
    )
    assert {"200", "202", "409", "413", "501"} <= set(post["responses"])


def test_fifo_admission_positions_and_cancellation(
    tmp_path: Path, slow_bandit: OracleHandle
) -> None:
    with (
        control_server(tmp_path / "state", max_active_runs=1) as server,
        httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
    ):
        body = small_request(slow_bandit.base_url, groups=2, max_steps=4)
        created = [http.post("/v1/openenv/runs", json=body).json() for _ in range(3)]
        assert created[0]["state"] == "queued"  # the 202 is answered before admission
        assert created[0]["admission"]["queue_position"] == 1
        first, second, third = (
            http.get(f"/v1/openenv/runs/{run['run_id']}").json() for run in created
        )
        assert first["state"] != "queued"
        assert "queue_position" not in first["admission"]
        assert second["state"] == "queued"
        assert second["admission"]["queue_position"] == 1
        assert third["admission"]["queue_position"] == 2
        assert [a["admission"]["sequence"] for a in (first, second, third)] == [1, 2, 3]
        listing = http.get("/v1/openenv/runs").json()["runs"]
        assert [run["run_id"] for run in listing] == [
            third["run_id"],
            second["run_id"],
            first["run_id"],
        ]
        cancelled = http.delete(f"/v1/openenv/runs/{second['run_id']}").json()
        assert cancelled["state"] == "cancelled"
        assert "queue_position" not in cancelled["admission"]
        assert (
            http.get(f"/v1/openenv/runs/{third['run_id']}").json()["admission"]["queue_position"]
            == 1
        )
        stopped = http.delete(f"/v1/openenv/runs/{first['run_id']}").json()
        assert stopped["state"] == "cancelled"
        assert "artifacts" not in stopped
        again = http.delete(f"/v1/openenv/runs/{first['run_id']}")
        assert again.status_code == 409
        assert _code(again) == "openenv_run_not_cancellable"
        last = wait_terminal(http, third["run_id"])
        assert last["state"] == "rollout_ready"
        assert last["admission"]["queue_wait_ms"] >= 0
        gauges = http.get("/metrics").text
        assert "kiln_openenv_runs_active 0.0" in gauges
        assert "kiln_openenv_runs_tracked 3.0" in gauges
        assert 'kiln_openenv_runs_total{status="cancelled"} 2.0' in gauges


def test_tracked_bound_forgets_the_oldest_terminal_and_refuses_when_all_live(
    tmp_path: Path, bandit: OracleHandle, slow_bandit: OracleHandle
) -> None:
    with (
        control_server(tmp_path / "state", max_active_runs=1, max_tracked_runs=2) as server,
        httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
    ):
        old = http.post(
            "/v1/openenv/runs", json=small_request(bandit.base_url, idempotency_key="old")
        ).json()
        wait_terminal(http, old["run_id"])
        slow = small_request(slow_bandit.base_url, groups=3, max_steps=8)
        busy = http.post("/v1/openenv/runs", json=slow).json()
        queued = http.post("/v1/openenv/runs", json=slow)  # forgets the terminal "old"
        assert queued.status_code == 202
        assert http.get(f"/v1/openenv/runs/{old['run_id']}").status_code == 404
        full = http.post("/v1/openenv/runs", json=slow)
        assert full.status_code == 503
        assert full.headers["retry-after"] == "5"
        assert _code(full) == "openenv_run_capacity_full"
        # the forgotten run's key no longer binds: it creates new work
        for run_id in (queued.json()["run_id"], busy["run_id"]):
            http.delete(f"/v1/openenv/runs/{run_id}")
        reused = http.post(
            "/v1/openenv/runs", json=small_request(bandit.base_url, idempotency_key="old")
        )
        assert reused.status_code == 202
        assert reused.json()["run_id"] != old["run_id"]
        wait_terminal(http, reused.json()["run_id"])


def test_a_disabled_control_plane_refuses_new_work(tmp_path: Path, bandit: OracleHandle) -> None:
    with (
        control_server(tmp_path / "state", enabled=False) as server,
        httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
    ):
        refused = http.post("/v1/openenv/runs", json=small_request(bandit.base_url))
        assert refused.status_code == 404
        assert _code(refused) == "openenv_disabled"
        assert (
            _code(http.post("/v1/openenv/inspect", json={"environment_urls": [bandit.base_url]}))
            == "openenv_disabled"
        )
        assert http.get("/v1/openenv/runs").json()["runs"] == []


def test_inspect_and_tasks_of_a_server_without_the_inventory_route(http: httpx.Client) -> None:
    """404 on /list_environments (OpenEnv before 0.5): no names, `task_api` unsupported."""
    old = start_server(ServerConfig("bandit", faults=("inventory-status=404",)))
    try:
        inspected = http.post("/v1/openenv/inspect", json={"environment_urls": [old.base_url]})
        assert inspected.status_code == 200, inspected.text
        assert inspected.json()["environments"][0]["identity"]["environments"] == []
        catalog = http.post("/v1/openenv/tasks", json={"environment_urls": [old.base_url]})
        assert catalog.status_code == 200, catalog.text
        assert catalog.json()["catalogs"][0]["catalog"] == {
            "environment_name": "BanditEnvironment", "task_api": "unsupported", "splits": []}
        wrong = http.post("/v1/openenv/tasks", json={"environment_urls": [old.base_url],
                                                      "environment_name": "bandit_env"})
        assert wrong.status_code == 400
        assert _code(wrong) == "openenv_invalid_task_selection"
    finally:
        old.stop()
