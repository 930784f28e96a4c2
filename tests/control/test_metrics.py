"""`/metrics`: exactly the fixed-cardinality §13 families, and nothing identifying in them."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from kiln_verify.control.config import CredentialHandle, PolicySpec
from kiln_verify.control.metrics import (
    AUTHENTICATED_OPERATIONS,
    CATALOG_STATUSES,
    EVALUATION_STATUSES,
    GATE_DECISIONS,
    PREFLIGHT_STATUSES,
    RUN_STATUSES,
    TERMINATIONS,
)
from kiln_verify.control.status import FAILURE_STAGES
from oracle.runner import ServerConfig, start_servers
from tests.control.support import control_server, run_to_end, small_request

TOKEN_ENV = "KILN_TEST_METRICS_TOKEN"
TOKEN = "metrics-t0ken-value"
FAMILIES = {
    "kiln_openenv_runs": ("counter", {"status": set(RUN_STATUSES)}),
    "kiln_openenv_run_failures": (
        "counter",
        {"stage": set(FAILURE_STAGES), "retryable": {"true", "false"}},
    ),
    "kiln_openenv_run_queue_wait_seconds": ("counter", {}),
    "kiln_openenv_runs_active": ("gauge", {}),
    "kiln_openenv_runs_queued": ("gauge", {}),
    "kiln_openenv_runs_tracked": ("gauge", {}),
    "kiln_openenv_episodes_collected": ("counter", {}),
    "kiln_openenv_episode_terminations": ("counter", {"termination": set(TERMINATIONS)}),
    "kiln_openenv_recoverable_protocol_errors": ("counter", {}),
    "kiln_openenv_capacity_retries": ("counter", {}),
    "kiln_openenv_environment_steps": ("counter", {}),
    "kiln_openenv_model_tokens": ("counter", {}),
    "kiln_openenv_model_latency_seconds": ("counter", {}),
    "kiln_openenv_task_catalog_inspections": ("counter", {"status": set(CATALOG_STATUSES)}),
    "kiln_openenv_authenticated_operations": (
        "counter",
        {"operation": set(AUTHENTICATED_OPERATIONS)},
    ),
    "kiln_openenv_training_preflights": ("counter", {"status": set(PREFLIGHT_STATUSES)}),
    "kiln_openenv_environment_evaluations": ("counter", {"status": set(EVALUATION_STATUSES)}),
    "kiln_openenv_environment_gates": ("counter", {"decision": set(GATE_DECISIONS)}),
}
SAMPLE = re.compile(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$")


def _parse(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str], float]]]:
    types: dict[str, str] = {}
    samples: list[tuple[str, dict[str, str], float]] = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, line
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            samples.append((match.group(1), labels, float(match.group(3))))
    return types, samples


def test_families_are_fixed_and_nothing_identifying_leaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    public, guarded = start_servers(
        ["bandit", ServerConfig("bandit", faults=(f"require-bearer={TOKEN_ENV}",))]
    )
    try:
        with (
            control_server(
                tmp_path / "state",
                credentials={"arcade-prod": CredentialHandle(guarded.base_url, TOKEN_ENV)},
                policies={"qwen-lora-7b": PolicySpec("random")},
            ) as server,
            httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
        ):
            before = _parse(http.get("/metrics").text)
            ran = [
                run_to_end(
                    http,
                    small_request(
                        public.base_url, idempotency_key="exp:secret-ish", adapter="qwen-lora-7b"
                    ),
                ),
                run_to_end(http, small_request(guarded.base_url, credential_ids=["arcade-prod"])),
                run_to_end(http, small_request(guarded.base_url)),  # 401: a failure
            ]
            assert [run["state"] for run in ran] == ["rollout_ready", "rollout_ready", "failed"]
            http.post(
                "/v1/openenv/tasks",
                json={"environment_urls": [guarded.base_url], "credential_ids": ["arcade-prod"]},
            )
            http.post("/v1/openenv/inspect", json={"environment_urls": [public.base_url]})
            text = http.get("/metrics").text
    finally:
        public.stop()
        guarded.stop()
    types, samples = _parse(text)
    before_types, before_samples = before
    assert {name.removesuffix("_total") for name in types} == set(FAMILIES)
    assert before_types == types  # no family appears or disappears
    for name, labels, _ in samples:
        kind, allowed = FAMILIES[name.removesuffix("_total")]
        assert types[name] == kind
        assert set(labels) == set(allowed), (name, labels)
        for label, value in labels.items():
            assert value in allowed[label], (name, label, value)
    expected_series = sum(
        max(1, _product(len(values) for values in allowed.values()))
        for _, allowed in FAMILIES.values()
    )
    assert len(samples) == expected_series == len(before_samples)
    series = {(n, tuple(sorted(labels.items()))): v for n, labels, v in samples}
    assert series[("kiln_openenv_runs_total", (("status", "rollout_ready"),))] == 2
    assert series[("kiln_openenv_episodes_collected_total", ())] == 4
    assert series[("kiln_openenv_authenticated_operations_total", (("operation", "run"),))] == 1
    assert (
        series[("kiln_openenv_authenticated_operations_total", (("operation", "task_catalog"),))]
        == 1
    )
    assert (
        series[
            ("kiln_openenv_run_failures_total", (("retryable", "false"), ("stage", "discovery")))
        ]
        == 1
    )
    forbidden = [
        TOKEN,
        TOKEN_ENV,
        "arcade-prod",
        "qwen-lora-7b",
        "exp:secret-ish",
        "bandit",
        "Bandit",
        "127.0.0.1",
        "http",
        str(public.port),
        str(guarded.port),
        *(run["run_id"] for run in ran),
        *(run["run_id"][:8] for run in ran),
    ]
    # everything but the sample values (a port's digits could occur inside a float)
    words = "\n".join(line.rsplit(" ", 1)[0] for line in text.splitlines()).lower()
    assert [word for word in forbidden if word.lower() in words] == []


def _product(sizes: object) -> int:
    total = 1
    for size in sizes:  # type: ignore[attr-defined]
        total *= size
    return total
