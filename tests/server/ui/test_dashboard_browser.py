"""The dashboard in a real browser (headless Chromium over the DevTools protocol), against
one control plane (``max_active_runs = 1``) and the oracle's environments.

Each test drives the page as a person would (types into the form, clicks), watches it
follow the server by polling, and ends with :func:`tests.server.ui.kit.finish`: no console
error, nothing requested beyond the server's origin, a screenshot that is not blank.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.control.config import CredentialHandle
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.server.runner import ServerHandle
from oracle.runner import ServerConfig, start_servers
from oracle.runner import ServerHandle as OracleHandle
from tests.browser import Chromium, launch_or_skip
from tests.control.support import client_of, control_server, wait_terminal
from tests.server.ui.kit import (
    HOSTILE,
    STATUS,
    HostileBandit,
    accepted_run,
    card_of,
    click,
    fill,
    finish,
    open_dashboard,
    small_run,
    wait_state,
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    chromium = launch_or_skip()
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture(scope="module")
def guarded() -> Iterator[OracleHandle]:
    """A bandit that requires a bearer token, and the token in this process's environment
    (where the control plane reads it) for the whole module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(TOKEN_ENV, TOKEN)
        (handle,) = start_servers([ServerConfig("bandit", faults=(f"require-bearer={TOKEN_ENV}",))])
        yield handle
        handle.stop()


@pytest.fixture(scope="module")
def dashboard(
    tmp_path_factory: pytest.TempPathFactory, guarded: OracleHandle
) -> Iterator[ServerHandle]:
    credentials = {"arcade": CredentialHandle(guarded.base_url, TOKEN_ENV)}
    state = tmp_path_factory.mktemp("ui") / "state"
    with control_server(state, max_active_runs=1, credentials=credentials) as handle:
        yield handle


@pytest.fixture(scope="module")
def api(dashboard: ServerHandle) -> Iterator[httpx.Client]:
    with client_of(dashboard, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def oracles() -> Iterator[dict[str, OracleHandle]]:
    """A Task API environment (algebra) and the hostile bandit."""
    algebra, hostile = start_servers(
        [ServerConfig("algebra"), ServerConfig("bandit", environment=HostileBandit)]
    )
    yield {"algebra": algebra, "hostile": hostile}
    algebra.stop()
    hostile.stop()


TOKEN_ENV = "KILN_TEST_UI_TOKEN"
TOKEN = "ui-t0ken-never-shown"


def test_a_rollout_started_from_the_form_reaches_rollout_ready_and_downloads(
    browser: Chromium,
    dashboard: ServerHandle,
    api: httpx.Client,
    bandit: OracleHandle,
    tmp_path: Path,
) -> None:
    tab = open_dashboard(browser, dashboard.base_url)
    fill(tab, small_run(bandit.base_url))
    click(tab, "#start-run")
    run_id = accepted_run(tab)
    wait_state(tab, run_id, "rollout_ready")
    status = api.get(f"/v1/openenv/runs/{run_id}").json()
    card = tab.evaluate(f"{card_of(run_id)}.innerText")
    assert status["request"]["idempotency_key"] in card  # the key the page made
    assert status["request"]["idempotency_key"] in tab.evaluate(STATUS)
    assert str(status["rollout_stats"]["mean_episode_return"]) in card
    for item in status["artifacts"]:
        assert item["sha256"].removeprefix("sha256:")[:12] in card
    tab.allow_downloads(tmp_path)
    click(tab, f".card[data-run-id='{run_id}'] a[data-kind=summary]")
    saved = tab.wait_download(tmp_path)
    summary = next(item for item in status["artifacts"] if item["kind"] == "summary")
    assert saved.stat().st_size == summary["bytes"]
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == summary["sha256"].removeprefix(
        "sha256:"
    )
    finish(tab, dashboard.base_url, "rollout")


def test_the_form_has_the_request_defaults_and_shows_a_refusal_at_its_field(
    browser: Chromium, dashboard: ServerHandle, bandit: OracleHandle
) -> None:
    tab = open_dashboard(browser, dashboard.base_url)
    defaults = tab.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#run-form [name]')].map("
        "c => [c.name, c.type === 'checkbox' ? c.checked : c.value]))"
    )
    for name, info in OpenEnvRunRequest.model_fields.items():
        if info.is_required() or name == "idempotency_key":  # the page makes the key
            continue
        shown = defaults[name]
        default = info.get_default(call_default_factory=True)
        if default is None:
            assert shown == "", name
        elif isinstance(default, bool):
            assert shown is default, name
        elif isinstance(default, float):
            assert float(shown) == default, name
        elif isinstance(default, dict):
            assert shown == "{}", name
        else:
            assert shown == str(default), name
    assert set(defaults) == set(OpenEnvRunRequest.model_fields) - {"idempotency_key"}
    fill(tab, small_run(bandit.base_url, group_size="0"))
    click(tab, "#start-run")
    error = tab.wait_for("document.getElementById('e-group_size').textContent")
    assert error.startswith("openenv_invalid_request: ")
    assert "$.group_size" in error
    assert (
        tab.evaluate("document.getElementById('f-group_size').getAttribute('aria-invalid')")
        == "true"
    )
    fill(tab, {"group_size": "2", "environment_urls": "ftp://127.0.0.1/"})
    click(tab, "#start-run")
    error = tab.wait_for("document.getElementById('e-environment_urls').textContent")
    assert error.startswith("openenv_invalid_url: ")
    assert tab.evaluate("document.getElementById('e-group_size').textContent") == ""
    finish(tab, dashboard.base_url, "validation", refused=["/v1/openenv/runs"])


def test_a_lost_answer_is_retried_with_the_same_key_into_the_accepted_run(
    browser: Chromium, dashboard: ServerHandle, api: httpx.Client, bandit: OracleHandle
) -> None:
    tab = open_dashboard(browser, dashboard.base_url)
    fill(tab, small_run(bandit.base_url, seed_start="40"))
    tab.send(
        "Fetch.enable",
        {"patterns": [{"urlPattern": "*/v1/openenv/runs", "requestStage": "Response"}]},
    )
    click(tab, "#start-run")
    while True:  # the poll's GETs go on; the POST's answer is lost after the server acted
        paused = tab.wait_event("Fetch.requestPaused")
        if paused["request"]["method"] == "POST":
            tab.send(
                "Fetch.failRequest",
                {"requestId": paused["requestId"], "errorReason": "ConnectionReset"},
            )
            break
        tab.send("Fetch.continueResponse", {"requestId": paused["requestId"]})
    tab.send("Fetch.disable")
    note = tab.wait_for(f"{STATUS}.includes('retry') && {STATUS}")
    key = note.rsplit(" ", 1)[1]
    click(tab, "#start-run")
    accepted = tab.wait_for(f"{STATUS}.startsWith('Already accepted') && {STATUS}")
    runs = [
        r
        for r in api.get("/v1/openenv/runs").json()["runs"]
        if r["request"].get("idempotency_key") == key
    ]
    assert len(runs) == 1
    assert runs[0]["run_id"] in accepted
    wait_terminal(api, runs[0]["run_id"])
    finish(tab, dashboard.base_url, "retry", refused=["/v1/openenv/runs"])  # the lost answer


def test_a_queued_run_is_cancelled_from_its_card(
    browser: Chromium, dashboard: ServerHandle, api: httpx.Client, slow_bandit: OracleHandle
) -> None:
    tab = open_dashboard(browser, dashboard.base_url)
    fill(tab, small_run(slow_bandit.base_url, groups="4", max_steps="8", concurrency="1"))
    click(tab, "#start-run")
    active = accepted_run(tab)
    fill(tab, {"seed_start": "100"})
    click(tab, "#start-run")
    queued = accepted_run(tab)
    wait_state(tab, queued, "queued")
    assert "queue position" in tab.evaluate(f"{card_of(queued)}.innerText")
    click(tab, f".card[data-run-id='{queued}'] button.cancel")
    wait_state(tab, queued, "cancelled")
    assert api.get(f"/v1/openenv/runs/{queued}").json()["state"] == "cancelled"
    tab.wait_for(f"!!{card_of(active)}?.querySelector('button.cancel')")
    click(tab, f".card[data-run-id='{active}'] button.cancel")
    assert wait_terminal(api, active)["state"] == "cancelled"
    finish(tab, dashboard.base_url, "cancel")


def test_inspect_and_a_task_page_against_the_oracle(
    browser: Chromium, dashboard: ServerHandle, api: httpx.Client, oracles: dict[str, OracleHandle]
) -> None:
    url = oracles["algebra"].base_url
    tab = open_dashboard(browser, dashboard.base_url)
    tab.evaluate(f"document.getElementById('env-urls').value = '{url}'")
    click(tab, "#inspect")
    text = tab.wait_for("document.querySelector('#env-out .environment')?.innerText")
    inspected = api.post("/v1/openenv/inspect", json={"environment_urls": [url]}).json()
    identity = inspected["environments"][0]["identity"]
    assert identity["metadata"]["name"] in text
    assert identity["schema_sha256"].removeprefix("sha256:")[:12] in text
    tab.evaluate("document.getElementById('task-limit').value = '5'")
    click(tab, "#tasks")
    tab.wait_for("!!document.querySelector('#env-out .catalog button.split')")
    click(tab, "#env-out .catalog button.split")
    rows = tab.wait_for("document.querySelectorAll('#env-out table.tasks tbody tr').length")
    assert rows == 5
    click(tab, "#tasks-next")
    tab.wait_for("document.querySelector('#env-out table.tasks tbody td')?.textContent === '5'")
    finish(tab, dashboard.base_url, "environments")


def test_a_hostile_environment_renders_inert(
    browser: Chromium, dashboard: ServerHandle, api: httpx.Client, oracles: dict[str, OracleHandle]
) -> None:
    url = oracles["hostile"].base_url
    run = api.post(
        "/v1/openenv/runs",
        json={"environment_urls": [url], "groups": 1, "group_size": 2, "max_steps": 2},
    )
    assert run.status_code == 202, run.text
    wait_terminal(api, run.json()["run_id"])
    tab = open_dashboard(browser, dashboard.base_url)
    card = tab.wait_for(
        f"document.querySelector(\".card[data-run-id='{run.json()['run_id']}']\")?.innerText"
    )
    assert f"Hostile{HOSTILE}" in card  # the environment's name, as text
    tab.evaluate(f"document.getElementById('env-urls').value = '{url}'")
    click(tab, "#inspect")
    text = tab.wait_for("document.querySelector('#env-out .environment')?.innerText")
    assert f"description {HOSTILE}" in text
    tab.evaluate("document.querySelectorAll('#env-out details').forEach(d => d.open = true)")
    text = tab.evaluate("document.querySelector('#env-out .environment').innerText")
    assert HOSTILE in text.split("readme", 1)[1]  # the README and the schemas, as text
    assert "Observation <img" in text
    tab.evaluate("document.getElementById('task-split').value = 'hostile'")
    click(tab, "#tasks")
    rows = tab.wait_for("document.querySelector('#env-out table.tasks')?.innerText")
    assert "row 2 <img" in rows
    page: Any = tab.evaluate(
        "({pwned: window.__pwned === undefined ? null : window.__pwned,"
        " active: document.querySelectorAll('img,script:not([src]),iframe,object,embed,b').length})"
    )
    assert page == {"pwned": None, "active": 0}
    finish(tab, dashboard.base_url, "hostile")


def test_a_credential_handle_runs_and_the_token_never_reaches_the_page(
    browser: Chromium, dashboard: ServerHandle, api: httpx.Client, guarded: OracleHandle
) -> None:
    tab = open_dashboard(browser, dashboard.base_url)
    fill(tab, small_run(guarded.base_url, credential_ids="arcade", seed_start="7"))
    click(tab, "#start-run")
    run_id = accepted_run(tab)
    wait_state(tab, run_id, "rollout_ready")
    assert api.get(f"/v1/openenv/runs/{run_id}").json()["request"]["credential_ids"] == ["arcade"]
    fill(tab, {"credential_ids": "", "seed_start": "8"})  # without it: a typed failure
    click(tab, "#start-run")
    refused = accepted_run(tab)
    wait_state(tab, refused, "failed")
    failure = api.get(f"/v1/openenv/runs/{refused}").json()["failure"]
    card = tab.evaluate(f"{card_of(refused)}.innerText")
    for label, value in (
        ("stage", failure["stage"]),
        ("retryable", "no"),
        ("hint", failure["hint"]),
    ):
        assert f"{label}\n{value}" in card
    assert f"Failure {failure['code']}" in card
    assert failure["retryable"] is False
    tab.evaluate(f"document.getElementById('env-urls').value = '{guarded.base_url}'")
    tab.evaluate("document.getElementById('env-handles').value = 'arcade'")
    click(tab, "#inspect")
    assert "bearer" in tab.wait_for("document.querySelector('#env-out .environment')?.innerText")
    seen = tab.evaluate(
        "(async () => [document.documentElement.outerHTML, document.body.innerText,"
        " await (await fetch('/v1/openenv/runs')).text()].join('\\n'))()"
    )
    assert TOKEN not in seen
    assert "arcade" in seen
    finish(tab, dashboard.base_url, "credentials")
