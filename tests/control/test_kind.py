"""Run kinds plug in: a kind is a table entry, and the registry, store and routes stay as they are.

A stand-in ``train`` kind (its own admission, executor, progress shape and artifact table,
declared here and nowhere in the package) is served next to ``rollout`` by an unchanged
server: admission runs once and its controls reach the executor; the artifact route serves
exactly the kind's table. A kind missing from the table is ``openenv_run_kind_unsupported``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.control.admission import parse_run_request
from kiln_verify.control.kind import ArtifactFile, RunKind, kind_of
from kiln_verify.control.kinds import KINDS, ROLLOUT, TRAIN
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.status import RunArtifact, RunProgress
from kiln_verify.control.store import RunStore
from kiln_verify.control.training.records import OpenEnvTrainingContract
from kiln_verify.errors import ApiRequestInvalid, ApiRunKindUnsupported
from kiln_verify.server.runner import start_in_thread
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import config, small_request, wait_terminal

RECEIPT = b'{"trained": true}\n'
CONTRACT = {"schema": "kiln.openenv-training-contract.v1", "effective_config": {}}


class StandIn:
    """A ``train`` kind whose every declaration records how it was used."""

    def __init__(self) -> None:
        self.admitted: list[OpenEnvRunRequest] = []
        self.executed: list[Any] = []

    def admit(self, request: OpenEnvRunRequest, _config: Any) -> dict[str, Any]:
        if request.output_adapter == "refused":
            raise ApiRequestInvalid("the stand-in refuses this adapter")
        self.admitted.append(request)
        return {"controls": len(self.admitted)}

    async def execute(self, registry: RunRegistry, run_id: str, controls: Any) -> None:
        self.executed.append(controls)
        path = registry.store.run_dir(run_id) / "train-receipt.json"
        await asyncio.to_thread(path.write_bytes, RECEIPT)
        registry.finish(
            run_id,
            "completed",
            artifacts=[
                RunArtifact(
                    kind="train_receipt",
                    url=f"/v1/openenv/runs/{run_id}/artifacts/train_receipt",
                    sha256="sha256:" + hashlib.sha256(RECEIPT).hexdigest(),
                    bytes=len(RECEIPT),
                )
            ],
        )

    @staticmethod
    def progress(request: OpenEnvRunRequest) -> RunProgress:
        return RunProgress(
            groups_completed=0, groups_total=1, rollouts_completed=0, rollouts_total=1
        )

    def kind(self) -> RunKind:
        return RunKind(
            name="train",
            admit=self.admit,
            execute=self.execute,
            progress=self.progress,
            artifacts={
                "train_receipt": ArtifactFile("train-receipt.json", 1 << 20, "application/json")
            },
            contract=lambda _controls: OpenEnvTrainingContract.from_json(CONTRACT),
        )


@pytest.fixture
def stand_in() -> StandIn:
    return StandIn()


@pytest.fixture
def served(tmp_path: Path, stand_in: StandIn) -> Iterator[httpx.Client]:
    kinds = {**KINDS, "train": stand_in.kind()}
    handle = start_in_thread(config(tmp_path / "state"), kinds)
    try:
        with httpx.Client(base_url=handle.base_url, trust_env=False, timeout=60) as http:
            yield http
    finally:
        handle.stop()


def test_rollout_and_train_are_served_and_a_missing_kind_is_unsupported() -> None:
    assert list(KINDS) == ["rollout", "train"]
    assert KINDS["rollout"] is ROLLOUT
    assert set(ROLLOUT.artifacts) == {"dataset", "replay", "summary"}
    assert kind_of(KINDS, "train") is TRAIN
    with pytest.raises(ApiRunKindUnsupported) as caught:
        kind_of({"rollout": ROLLOUT}, "train")
    assert caught.value.rule == (
        "kind=train (the training hand-off) is not supported by this server"
    )


def test_a_plugged_in_kind_is_admitted_once_executed_and_served(
    served: httpx.Client, stand_in: StandIn, bandit: OracleHandle
) -> None:
    body = small_request(bandit.base_url, kind="train", output_adapter="next")
    created = served.post("/v1/openenv/runs", json=body)
    assert created.status_code == 202, created.text
    run = wait_terminal(served, created.json()["run_id"])
    assert run["state"] == "completed"
    assert run["progress"]["groups_total"] == 1  # the kind's progress shape
    assert len(stand_in.admitted) == 1  # admitted once, by the route
    assert stand_in.executed == [{"controls": 1}]  # ... and its controls used once
    assert run["training_contract"]["schema"] == "kiln.openenv-training-contract.v1"  # sealed
    answer = served.get(run["artifacts"][0]["url"])
    assert answer.status_code == 200
    assert answer.content == RECEIPT
    assert answer.headers["content-type"] == "application/json"
    # the rollout kind's files are not in this kind's table
    missing = served.get(f"/v1/openenv/runs/{run['run_id']}/artifacts/dataset")
    assert missing.status_code == 404
    # the kind's refusal is the route's answer; nothing is created
    refused = served.post(
        "/v1/openenv/runs",
        json=small_request(bandit.base_url, kind="train", output_adapter="refused"),
    )
    assert refused.status_code == 400
    assert len(served.get("/v1/openenv/runs").json()["runs"]) == 1
    # rollout runs are still served beside it
    rollout = served.post("/v1/openenv/runs", json=small_request(bandit.base_url))
    assert wait_terminal(served, rollout.json()["run_id"])["state"] == "rollout_ready"


def test_the_registry_hands_admissions_controls_to_the_executor(tmp_path: Path) -> None:
    seen: list[Any] = []
    calls: list[OpenEnvRunRequest] = []

    async def execute(registry: RunRegistry, run_id: str, controls: Any) -> None:
        seen.append(controls)
        registry.finish(run_id, "cancelled", error="stopped by the test")

    def admit(request: OpenEnvRunRequest, settings: Any) -> Any:
        calls.append(request)
        return ROLLOUT.admit(request, settings)

    kinds = {"rollout": RunKind("rollout", admit, execute, ROLLOUT.progress, ROLLOUT.artifacts)}

    async def main() -> RunRegistry:
        settings = config(tmp_path)
        registry = RunRegistry(settings, RunStore(settings.runs_root), kinds)
        registry.restore()
        request = parse_run_request(small_request("http://127.0.0.1:1"))
        registry.create(request)  # admitted by the kind, then queued with its controls
        registry.submit(request)  # queued without controls (as a run restored from disk)
        while len(seen) < 2:
            await asyncio.sleep(0.01)
        return registry

    registry = asyncio.run(main())
    assert len(calls) == 1
    assert type(seen[0]).__name__ == "CollectionControls"
    assert seen[1] is None  # the executor admits it itself
    assert registry._admitted == {}  # nothing is kept once handed over
