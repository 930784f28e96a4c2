"""The paired-evaluation stage against real oracle bandits (kiln-openenv-contract §9).

The decision tests play scripted arms (the oracle lane's best and worst puller, as Kiln's
own oracle test does) so 20 paired groups cost milliseconds; promotion and serving are real:
a server configuration with the session-shared tiny model as its resident model, the shared
completed SFT bundle of the import tests installed through the verified import, and the
resident model's serving rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kinds.environment_eval import EvaluationJob
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.sections.model import ModelSettings
from oracle.runner import ServerConfig as OracleConfig
from oracle.runner import ServerHandle, start_servers
from tests.openenv.collect.options import make_controls

LANE: dict[str, Any] = {
    "group_size": 1,
    "max_steps": 1,
    "thinking": False,
    "max_recoverable_errors": 0,
    "capacity_wait_seconds": 10,
    "temperature": 0.0,
    "concurrency": 1,
}
TRAINING = {"groups": 4, "seed_start": 980}


@pytest.fixture(scope="module")
def bandits() -> Iterator[tuple[ServerHandle, ServerHandle, ServerHandle]]:
    """(a well-behaved bandit, one whose every reset differs: `nondeterministic-reset`, one
    whose identity changes after the baseline's 20 resets: `identity-drift=20`)."""
    handles = start_servers(
        [
            OracleConfig("bandit", max_sessions=1),
            OracleConfig("bandit", max_sessions=1, faults=["nondeterministic-reset"]),
            OracleConfig("bandit", max_sessions=1, faults=["identity-drift=20"]),
        ]
    )
    yield handles[0], handles[1], handles[2]
    for handle in handles:
        handle.stop()


@pytest.fixture(scope="module")
def completed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(tiny model, completed ``sft_01.kiln-hf``): the import tests' shared build."""
    from tests.hf.importer.conftest import model_and_bundle

    return model_and_bundle(tmp_path_factory)


@pytest.fixture(scope="module")
def resident(
    tmp_path_factory: pytest.TempPathFactory, completed: tuple[Path, Path]
) -> ServerConfig:
    state = tmp_path_factory.mktemp("env-eval") / "state"
    state.mkdir()  # a server creates it when it starts
    return ServerConfig(
        host="127.0.0.1", port=0, state_dir=state, model=ModelSettings(completed[0])
    )


def train_request(
    url: str, environment_eval: dict[str, Any] | None, **fields: Any
) -> OpenEnvRunRequest:
    body: dict[str, Any] = {
        "kind": "train",
        "environment_urls": [url],
        "output_adapter": "arm-v1",
        "environment_eval": environment_eval,
        **{k: v for k, v in LANE.items()},
        **TRAINING,
        **fields,
    }
    return OpenEnvRunRequest.model_validate(body)


def job_for(
    run_dir: Path, url: str, environment_eval: dict[str, Any] | None, **fields: Any
) -> EvaluationJob:
    """The job of a train request (admission's rules applied) on a fresh run directory."""
    request = train_request(url, environment_eval, **fields)
    run_dir.mkdir(parents=True, exist_ok=True)
    controls = make_controls([url], **LANE, groups=request.groups, seed_start=request.seed_start)
    job = EvaluationJob.from_request("run-eval-1", run_dir, request, controls)
    assert job is not None
    return job
