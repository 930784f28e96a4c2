"""The paired-evaluation oracle lane (kiln-openenv-contract §9), collected once per session.

Bandit limited to one session; 20 groups x 1 from seed 1000, one step, thinking off,
recoverable budget 0, capacity wait 10 s. The baseline always pulls the worst arm and the
candidate the best, both recomputed from the seed with the bandit's own payout ranking.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.openenv.collect import CollectionControls
from kiln_verify.openenv.evaluate import Evaluation, run_evaluation
from kiln_verify.openenv.policy.base import PolicyRequest
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.records.evaluation import EnvironmentEvalGate
from oracle.envs.bandit import ARMS, arm_ranks
from oracle.runner import ServerConfig, ServerHandle, start_server
from tests.openenv.collect.options import make_controls

LANE: dict[str, Any] = {
    "groups": 20,
    "group_size": 1,
    "seed_start": 1000,
    "max_steps": 1,
    "thinking": False,
    "max_recoverable_errors": 0,
    "capacity_wait_seconds": 10,
    "temperature": 0.0,
}


def best_arm(request: PolicyRequest) -> str:
    return json.dumps({"arm": arm_ranks(request.seed).index(ARMS - 1)})


def worst_arm(request: PolicyRequest) -> str:
    return json.dumps({"arm": arm_ranks(request.seed).index(0)})


def best() -> ScriptedPolicy:
    return ScriptedPolicy(best_arm, name="best-arm")


def worst() -> ScriptedPolicy:
    return ScriptedPolicy(worst_arm, name="worst-arm")


def summary_of(directory: Path, side: str) -> Path:
    return directory / side / "openenv.rollout-summary.json"


@dataclass
class Lane:
    server: ServerHandle
    directory: Path
    evaluation: Evaluation

    def controls(self, **overrides: Any) -> CollectionControls:
        return make_controls([self.server.base_url], **{**LANE, **overrides})


@pytest.fixture(scope="session")
def bandit() -> Iterator[ServerHandle]:
    handle = start_server(ServerConfig("bandit", max_sessions=1))
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def lane(bandit: ServerHandle, tmp_path_factory: pytest.TempPathFactory) -> Lane:
    directory = tmp_path_factory.mktemp("lane")
    controls = make_controls([bandit.base_url], **LANE)
    evaluation = asyncio.run(
        run_evaluation(
            controls,
            worst(),
            best(),
            directory,
            gate=EnvironmentEvalGate(min_mean_improvement=0.0),
        )
    )
    return Lane(bandit, directory, evaluation)
