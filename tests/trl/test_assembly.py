"""The factory's recorder assembles a batch with the collector's own step
(``assemble_collection``): a batch of whole groups becomes the collection the collector
would have built, and a group whose candidates were reset to different observations is
refused in the recorder's terms (``trl_recording_failed`` naming the collector's rule and
code), before the environment is re-inspected. Real oracle servers over real sockets."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kiln_verify.errors import TrlRecordingFailed
from kiln_verify.openenv.collect import build_bundle
from kiln_verify.openenv.collect.controls import CollectionOptions
from kiln_verify.openenv.collect.engine import behavior_identity
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.trl.batch import _collection
from kiln_verify.trl.factory import OpenEnvToolFactory
from pytest_kiln.fixtures import OracleFactory

ROW: dict[str, Any] = {"prompt": [{"role": "user", "content": ""}]}
ARGS = SimpleNamespace(temperature=1.0, max_completion_length=16)


def _played(factory: OpenEnvToolFactory, groups: int) -> None:
    """``groups`` groups of the factory's size reset and each given one action."""
    for _ in range(groups * factory.run.group_size):
        instance = factory()
        instance.reset(**ROW)
        getattr(instance, factory.tool_name)(delta=1)


def _factory(start: OracleFactory, *faults: str) -> OpenEnvToolFactory:
    server = start("counter", max_sessions=8, faults=list(faults))
    options = CollectionOptions(group_size=2, thinking=False, capacity_wait_seconds=1)
    return OpenEnvToolFactory(server.base_url, options=options)


def test_a_batch_assembles_as_the_collector_assembles(start: OracleFactory) -> None:
    factory = _factory(start)
    try:
        _played(factory, 2)
        behavior = behavior_identity(RandomPolicy())
        collection = _collection(factory.batch, factory.run, ARGS, behavior, None)
    finally:
        factory.close()
    assert [group.plan.group_index for group in collection.groups] == [0, 1]
    assert [group.plan.seed for group in collection.groups] == [0, 1]
    assert build_bundle(collection).record.rollout_count == 4


def test_a_group_reset_differently_is_refused_in_the_recorder_s_terms(
    start: OracleFactory,
) -> None:
    factory = _factory(start, "nondeterministic-reset")
    try:
        _played(factory, 1)
        behavior = behavior_identity(RandomPolicy())
        with pytest.raises(TrlRecordingFailed) as raised:
            _collection(factory.batch, factory.run, ARGS, behavior, None)
    finally:
        factory.close()
    assert raised.value.rule.startswith(
        "group 0: candidate 1 was reset to another observation than candidate 0; "
        "reset(seed) must be deterministic (reset_nondeterministic, conformance case "
    )
