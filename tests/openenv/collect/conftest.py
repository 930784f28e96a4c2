"""Shared oracle servers and a one-call collection helper for the collector tests.

Per-test servers come from ``start`` (the plugin's ``openenv_oracle``, tests/conftest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.openenv.collect import Bundle, run_collection
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.records.replay import ReplayManifest, read_replay
from kiln_verify.openenv.records.rollout import AgenticGroup, iter_rollout_lines
from kiln_verify.openenv.records.summary import RolloutSummary, read_summary
from oracle.runner import ServerHandle, start_servers
from tests.openenv.collect.options import make_controls

Start = Callable[..., ServerHandle]


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, ServerHandle]]:
    handles = start_servers(["counter", "bandit"])
    yield {handle.name: handle for handle in handles}
    for handle in handles:
        handle.stop()


@dataclass
class Result:
    bundle: Bundle
    groups: list[AgenticGroup]
    replay: ReplayManifest
    summary: RolloutSummary
    directory: Path


def outputs(directory: Path) -> dict[str, str]:
    return {
        "output": str(directory / "openenv.rollouts.jsonl"),
        "replay_output": str(directory / "openenv.replay.json"),
        "summary_output": str(directory / "openenv.rollout-summary.json"),
    }


def collect(
    directory: Path,
    urls: Sequence[str],
    policy: Policy | None = None,
    *,
    reset_templates: Sequence[Mapping[str, Any]] | None = None,
    **options: Any,
) -> Result:
    """Collect into ``directory`` and read the three files back with the record readers."""
    options = {"groups": len(urls), "group_size": 2, "max_steps": 3, **options}
    controls = make_controls(urls, reset_templates=reset_templates, **outputs(directory), **options)
    bundle = asyncio.run(run_collection(controls, policy or RandomPolicy()))
    with open(controls.output, "rb") as stream:
        groups = [line.group for line in iter_rollout_lines(stream)]
    replay = read_replay(Path(controls.replay_output).read_bytes())
    summary = read_summary(Path(controls.summary_output).read_bytes())
    assert Path(controls.output).read_bytes() == bundle.dataset
    return Result(bundle, groups, replay, summary, directory)


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())
