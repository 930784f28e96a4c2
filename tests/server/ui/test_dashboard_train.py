"""A train run watched in the browser, and the hand-off panel, on ``serve --model``.

The resident model is the session's warm-started tiny model (tests/control/train's
build). The run is started from the form (kind=train, GRPO overrides and a held-out
evaluation typed as JSON): its card shows training running, then the evaluation with the
exact p-value, the decision and the gate badge, all equal to the status the API serves.
The gate asks for a mean return no one-pull episode reaches, so the decision is
``rejected`` whatever the candidate plays. The HF export registry panel then lists an
export made through the API, downloads it, and deletes it with its digest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from kiln_verify.server.runner import ServerHandle
from oracle.runner import ServerHandle as OracleHandle
from tests import models
from tests.browser import Chromium, launch_or_skip
from tests.control.support import client_of, resident_config, running
from tests.hf.export.conftest import ROWS
from tests.server.ui.kit import accepted_run, card_of, click, fill, finish, open_dashboard

GATE = {
    "groups": 20,
    "group_size": 1,
    "seed_start": 100,
    "gate": {"min_mean_improvement": 0.0, "min_mean_return": 2.0},
}
TRAINING = {"learning_rate": 0.01, "lora_rank": 2, "lora_alpha": 4}


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    chromium = launch_or_skip()
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture(scope="module")
def resident(
    tmp_path_factory: pytest.TempPathFactory, bandit: OracleHandle
) -> Iterator[ServerHandle]:
    model = models.warm_bandit_model(tmp_path_factory, bandit.base_url)
    state = tmp_path_factory.mktemp("ui-train") / "state"
    with running(resident_config(state, model)) as handle:
        yield handle


def test_a_train_run_shows_training_evaluation_and_the_gate(
    browser: Chromium, resident: ServerHandle, bandit: OracleHandle
) -> None:
    tab = open_dashboard(browser, resident.base_url)
    fill(tab, {"kind": "train"})
    fill(
        tab,
        {
            "environment_urls": bandit.base_url,
            "output_adapter": "ui-gated.v1",
            "groups": "4",
            "group_size": "2",
            "max_steps": "1",
            "concurrency": "1",
            "max_action_tokens": "16",
            "capacity_wait_seconds": "5",
            "training_config": json.dumps(TRAINING),
            "environment_eval": json.dumps(GATE),
        },
    )
    tab.evaluate("document.getElementById('f-thinking').checked = false")
    click(tab, "#start-run")
    run_id = accepted_run(tab)
    card = card_of(run_id)
    tab.wait_for(f"!!{card}")
    seen: set[str] = set()
    deadline = time.monotonic() + 300
    while (state := tab.evaluate(f"{card}.dataset.state")) not in ("completed", "failed"):
        seen.add(state)
        if state == "training_running":
            assert tab.evaluate(f"!!{card}.querySelector('.training')")
        assert time.monotonic() < deadline, seen
        time.sleep(0.25)
    assert state == "completed"
    assert "training_running" in seen
    with client_of(resident) as http:
        status = http.get(f"/v1/openenv/runs/{run_id}").json()
    assert status["request"]["environment_eval"] == GATE
    evidence = status["environment_evaluation"]["evidence"]
    text = tab.evaluate(f"{card}.innerText")
    shown = text.split("exact sign-test p\n", 1)[1].split("\n", 1)[0]
    assert float(shown) == evidence["exact_sign_test_p_value"]  # exact: the shortest repr
    tally = f"{evidence['improved_groups']} / {evidence['regressed_groups']} / "
    assert f"improved / regressed / tied\n{tally}{evidence['tied_groups']}" in text
    assert f"decision\n{evidence['decision']}" in text
    badges = tab.evaluate(
        f"[...{card}.querySelectorAll('.badge')].map(b => [b.textContent, b.className])"
    )
    assert ["rejected", "badge badge-gate-rejected"] in badges
    assert ["regression", "badge badge-gate-regression"] in badges  # training.gate_outcome
    assert status["training"]["gate_outcome"] == "regression"
    finish(tab, resident.base_url, "train")


def test_the_export_registry_panel_downloads_and_deletes(
    browser: Chromium, resident: ServerHandle, tmp_path: Path
) -> None:
    with client_of(resident) as http:
        created = http.post("/v1/train/hf/sft/exports", json={"name": "ui_sft", "examples": ROWS})
        assert created.status_code == 201, created.text
        summary = created.json()
        tab = open_dashboard(browser, resident.base_url)
        row = "document.querySelector(\"tr[data-export='ui_sft']\")"
        text = tab.wait_for(f"{row}?.innerText")
        assert summary["export_sha256"].removeprefix("sha256:")[:12] in text
        assert "installed" in tab.evaluate("document.getElementById('adapters').innerText")
        tab.allow_downloads(tmp_path)
        click(tab, "tr[data-export='ui_sft'] a")
        saved = tab.wait_download(tmp_path)
        download = http.get("/v1/train/hf/exports/ui_sft/download")
        assert saved.read_bytes() == download.content
        click(tab, "tr[data-export='ui_sft'] button.delete")
        tab.wait_for(f"!{row}")
        assert http.get("/v1/train/hf/exports").json()["data"] == []
    finish(tab, resident.base_url, "exports")
