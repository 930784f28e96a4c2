"""One real collection against the built-in bandit oracle, shared by the training tests.

A scripted policy makes every shape §5.7 distinguishes: group 0 answers nothing at all
(every candidate ``MODEL_ACTION_NO_OUTPUT``), later groups have one silent candidate and
two that pull arms (different arms, except in group 5: same arm, same seed, equal
rewards). Collected once per session (about half a second), into a session temporary
directory.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.openenv.collect import Bundle, run_collection
from kiln_verify.openenv.policy.base import PolicyRequest
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.records.rollout import AgenticGroup, iter_rollout_lines
from kiln_verify.openenv.records.summary import RolloutSummary, read_summary
from oracle.runner import start_servers
from tests.openenv.collect.conftest import outputs
from tests.openenv.collect.options import make_controls

GROUPS = 6
GROUP_SIZE = 3


def script(request: PolicyRequest) -> str:
    """Silent everywhere in group 0 (seed 0), silent candidate 0 elsewhere; in group 5
    both speaking candidates pull arm 0 (equal rewards: no gradient)."""
    if request.seed == 0 or request.candidate_index == 0:
        return ""
    arm = 0 if request.candidate_index == 1 or request.seed == 5 else (request.seed * 3) % 10
    return f'{{"arm": {arm}}}'


@dataclass(frozen=True)
class Collected:
    bundle: Bundle
    groups: list[AgenticGroup]
    summary: RolloutSummary
    directory: Path


@pytest.fixture(scope="session")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    (handle,) = start_servers(["bandit"])
    try:
        directory = tmp_path_factory.mktemp("training-collection")
        paths: dict[str, Any] = outputs(directory)
        controls = make_controls(
            [handle.base_url],
            groups=GROUPS,
            group_size=GROUP_SIZE,
            max_steps=2,
            thinking=False,
            **paths,
        )
        bundle = asyncio.run(run_collection(controls, ScriptedPolicy(script)))
    finally:
        handle.stop()
    with open(controls.output, "rb") as stream:
        groups = [line.group for line in iter_rollout_lines(stream)]
    summary = read_summary(Path(controls.summary_output).read_bytes())
    return Collected(bundle, groups, summary, directory)
