"""Every failure code a rollout run can reach, provoked through real runs (§10).

The oracle's fault profiles are the environments: unreachable, authenticated without a
credential, refusing every session (capacity), failing its factory, answering in binary,
reflecting the credential, drifting its identity mid-run, resetting nondeterministically.
Each run must end ``failed`` with the code, stage and ``retryable`` of the §10.2 rules,
``protocol_code``/``http_status`` only where the environment supplied one, and the legacy
``error`` projection equal to the message. Publication failure (a full disk) cannot come
from a peer, so that one path is a stub. The restoration codes (``run_interrupted``,
``run_admission_failed``) and ``persisted_contract_invalid`` after a configuration change
are in ``test_restore.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kiln_verify.control import executor
from kiln_verify.control.config import CredentialHandle
from kiln_verify.errors import PublishFailed
from kiln_verify.server.runner import start_in_thread
from oracle.runner import ServerConfig, ServerHandle, start_servers
from tests.control.support import config, run_to_end, small_request

TOKEN_ENV = "KILN_TEST_FAILURE_TOKEN"
TOKEN = "s3cr3t-failure-token"

FAULTS: dict[str, tuple[str, ...]] = {
    "authenticated": (f"require-bearer={TOKEN_ENV}",),
    "reflecting": (f"require-bearer={TOKEN_ENV}", "reflect-authorization"),
    "full": ("flaky-capacity=1",),
    "factory": ("factory-error",),
    "binary": ("binary-frame",),
    "drifting": ("identity-drift=1",),
    "nondeterministic": ("nondeterministic-reset",),
}


@dataclasses.dataclass
class Lab:
    http: httpx.Client
    oracles: dict[str, ServerHandle]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    patch = pytest.MonkeyPatch()
    patch.setenv(TOKEN_ENV, TOKEN)
    handles = start_servers([ServerConfig("bandit", faults=f) for f in FAULTS.values()])
    oracles = dict(zip(FAULTS, handles, strict=True))
    credentials = {
        "reflector": CredentialHandle(oracles["reflecting"].base_url, TOKEN_ENV),
    }
    server = start_in_thread(config(tmp_path_factory.mktemp("failures"), credentials=credentials))
    try:
        with httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http:
            yield Lab(http, oracles)
    finally:
        server.stop()
        for handle in handles:
            handle.stop()
        patch.undo()


def _failed(lab: Lab, url: str, **fields: Any) -> dict[str, Any]:
    status = run_to_end(lab.http, small_request(url, **fields))
    assert status["state"] == "failed", status
    failure: dict[str, Any] = status["failure"]
    assert failure["schema"] == "kiln.openenv-run-failure.v1"
    assert status["error"] == failure["message"]
    assert len(failure["message"].encode()) <= 4096
    assert failure["hint"]
    assert "artifacts" not in status
    assert TOKEN not in str(status)
    return failure


def _dead_url() -> str:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def test_unreachable_environment(lab: Lab) -> None:
    failure = _failed(lab, _dead_url())
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_unavailable",
        "discovery",
        True,
    )
    assert "http_status" not in failure
    assert "protocol_code" not in failure


def test_http_status_from_the_environment(lab: Lab) -> None:
    failure = _failed(lab, lab.oracles["authenticated"].base_url)
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_unavailable",
        "discovery",
        False,
    )
    assert failure["http_status"] == 401
    assert "protocol_code" not in failure


def test_capacity_wait_exhausted(lab: Lab) -> None:
    failure = _failed(lab, lab.oracles["full"].base_url, capacity_wait_seconds=1)
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_capacity_exhausted",
        "collection",
        True,
    )


def test_server_error_status_is_retryable(lab: Lab) -> None:
    # factory-error: /metadata builds an environment and answers 500 during discovery
    failure = _failed(lab, lab.oracles["factory"].base_url)
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_unavailable",
        "discovery",
        True,
    )
    assert failure["http_status"] == 500


def test_protocol_error_code_is_kept(lab: Lab, bandit: ServerHandle) -> None:
    # the environment refuses the reset itself: EXECUTION_ERROR ends the collection
    failure = _failed(lab, bandit.base_url, reset_options={"episode_id": 5})
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_protocol_error",
        "collection",
        False,
    )
    assert failure["protocol_code"] == "EXECUTION_ERROR"
    assert "http_status" not in failure


def test_protocol_violation_without_a_code(lab: Lab) -> None:
    failure = _failed(lab, lab.oracles["binary"].base_url)
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_protocol_error",
        "collection",
        False,
    )
    assert "protocol_code" not in failure


def test_reflected_credential(lab: Lab) -> None:
    failure = _failed(lab, lab.oracles["reflecting"].base_url, credential_ids=["reflector"])
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_protocol_error",
        "collection",
        False,
    )
    assert "credential_reflected" in failure["message"]


def test_identity_drift(lab: Lab) -> None:
    failure = _failed(lab, lab.oracles["drifting"].base_url)
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "environment_identity_changed",
        "identity_verification",
        True,
    )


def test_nondeterministic_reset_is_a_collection_failure(lab: Lab) -> None:
    failure = _failed(lab, lab.oracles["nondeterministic"].base_url)
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "collection_failed",
        "collection",
        True,
    )


def test_publication_failure(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise PublishFailed("write failed: No space left on device")

    monkeypatch.setattr(executor, "publish_files", full_disk)
    (healthy,) = start_servers(["bandit"])
    try:
        failure = _failed(lab, healthy.base_url)
    finally:
        healthy.stop()
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "artifact_publication_failed",
        "artifact_publication",
        False,
    )


def test_failure_metrics_count_stage_and_retryability(lab: Lab) -> None:
    before = _series(lab, "collection", "true")
    _failed(lab, lab.oracles["nondeterministic"].base_url)
    assert _series(lab, "collection", "true") == before + 1
    text = lab.http.get("/metrics").text
    assert TOKEN not in text
    assert TOKEN_ENV not in text
    assert "reflector" not in text


def _series(lab: Lab, stage: str, retryable: str) -> float:
    prefix = f'kiln_openenv_run_failures_total{{retryable="{retryable}",stage="{stage}"}} '
    for line in lab.http.get("/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    raise AssertionError(f"no series for {stage}/{retryable}")
