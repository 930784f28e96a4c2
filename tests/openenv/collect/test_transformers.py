"""The transformers policy on the tiny model produces a complete bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracle.runner import ServerHandle
from tests import models
from tests.openenv.collect.conftest import collect

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_tiny_model_bundle(
    servers: dict[str, ServerHandle], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from kiln_verify.openenv.policy.base import ZERO_CLOCK
    from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy
    model = models.tiny_model(tmp_path_factory)
    policy = TransformersPolicy(str(model), clock=ZERO_CLOCK)
    out: Path = tmp_path_factory.mktemp("bundle")
    result = collect(
        out, [servers["bandit"].base_url], policy, group_size=2, max_steps=2, max_action_tokens=16
    )
    summary = result.summary
    assert summary.rollout_count == 2
    assert summary.stats.total_model_tokens > 0
    assert summary.stats.mean_model_latency_ms == 0.0
    assert summary.behavior_policy is not None
    assert summary.behavior_policy.implementation == "kiln-verify/transformers"
    assert all("provenance" not in c.to_json() for g in result.groups for c in g.completions)
