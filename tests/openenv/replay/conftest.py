"""A collection helper and a same-port restart for the replay tests.

Servers come from ``start`` (the plugin's ``openenv_oracle``, tests/conftest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.openenv.collect import run_collection
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.records.replay import ReplayManifest, read_replay
from oracle.runner import ServerHandle
from tests.openenv.collect.options import make_controls

Start = Callable[..., ServerHandle]
Restart = Callable[..., ServerHandle]


@pytest.fixture
def restart(start: Start) -> Restart:
    """Stop ``handle`` and serve ``name`` (default: the same) on the same port again.

    The recorded base URL is what replay reaches, so a "redeployed" environment is a new
    server on the old port.
    """

    def _restart(handle: ServerHandle, name: str | None = None, **kwargs: Any) -> ServerHandle:
        handle.stop()
        return start(name or handle.name, port=handle.port, **kwargs)

    return _restart


def collect_bundle(
    directory: Path,
    urls: Sequence[str],
    policy: Policy | None = None,
    **options: Any,
) -> Path:
    """Collect with the collector's API into ``directory``; the summary path is returned."""
    options = {"groups": len(urls), "group_size": 2, "max_steps": 3, **options}
    controls = make_controls(
        urls,
        output=str(directory / "openenv.rollouts.jsonl"),
        replay_output=str(directory / "openenv.replay.json"),
        summary_output=str(directory / "openenv.rollout-summary.json"),
        **options,
    )
    asyncio.run(run_collection(controls, policy or RandomPolicy()))
    return Path(controls.summary_output)


def manifest_of(summary: Path) -> ReplayManifest:
    return read_replay((summary.parent / "openenv.replay.json").read_bytes())
