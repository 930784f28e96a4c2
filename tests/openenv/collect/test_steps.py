"""Collection in steps: a plan starts at any group, shards assemble into one run's bytes.

Groups ``[0, k)`` and ``[k, n)`` run separately (in one inspection, or in two as two hosts
would) and assembled give the very files of ``[0, n)`` run at once; the assembler refuses
groups that do not cover the plan, a group that broke integrity and an environment that
changed, each with the collector's own error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import EnvironmentIdentityChanged, ResetNondeterministic, UsageError
from kiln_verify.openenv.collect import (
    CollectedGroup,
    Collection,
    CollectionControls,
    ResetPlan,
    assemble_collection,
    build_bundle,
    collect,
    group_plan,
    inspect_environments,
    publish_bundle,
    run_groups,
)
from kiln_verify.openenv.collect.engine import behavior_identity
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from oracle.runner import ServerHandle
from tests.openenv.collect.conftest import outputs
from tests.openenv.collect.options import make_controls

GROUPS = 5


def _controls(servers: dict[str, ServerHandle], directory: Path) -> CollectionControls:
    urls = [servers["bandit"].base_url, servers["counter"].base_url]
    paths: dict[str, Any] = outputs(directory)
    return make_controls(urls, groups=GROUPS, group_size=3, seed_start=7, max_steps=4, **paths)


def _files(collection: Collection) -> tuple[bytes, bytes, bytes]:
    bundle = build_bundle(collection)
    return bundle.dataset, bundle.replay, bundle.summary


async def _sharded(controls: CollectionControls, cuts: Sequence[int]) -> Collection:
    """Every shard in one inspection of the environments."""
    policy = RandomPolicy()
    behavior = behavior_identity(policy)
    bounds = [0, *cuts, GROUPS]
    async with inspect_environments(controls) as found:
        groups: list[CollectedGroup] = []
        for start, stop in itertools.pairwise(bounds):
            groups += await run_groups(found, controls, policy, range(start, stop))
        return assemble_collection(controls, found, behavior, groups, await found.reinspect())


async def _two_hosts(controls: CollectionControls, cut: int) -> Collection:
    """Each shard in an inspection of its own; the first host assembles."""
    policy = RandomPolicy()
    async with inspect_environments(controls) as elsewhere:
        tail = await run_groups(elsewhere, controls, policy, range(cut, GROUPS))
    async with inspect_environments(controls) as found:
        head = await run_groups(found, controls, policy, range(cut))
        again = await found.reinspect()
        return assemble_collection(controls, found, behavior_identity(policy), head + tail, again)


def test_a_plan_starts_at_any_group() -> None:
    plan = ResetPlan.from_templates([{"a": 1}, {"seed": 3, "b": 2}, {}])
    whole = list(group_plan(plan, 9, 40))
    for first in range(10):
        part = list(group_plan(plan, 9, 40, first=first))
        assert part == whole[first:]
        for group in part:
            assert group.seed == 40 + group.group_index
            assert group.environment_index == group.group_index % 3


@pytest.mark.parametrize("cuts", [(0,), (2,), (5,), (1, 3, 4)])
def test_shards_assemble_into_the_bytes_of_one_run(
    cuts: tuple[int, ...], servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    controls = _controls(servers, tmp_path)
    whole = asyncio.run(collect(controls, RandomPolicy()))
    assert _files(asyncio.run(_sharded(controls, cuts))) == _files(whole)


def test_shards_from_two_inspections_assemble_alike(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    controls = _controls(servers, tmp_path)
    whole = _files(asyncio.run(collect(controls, RandomPolicy())))
    assert _files(asyncio.run(_two_hosts(controls, 3))) == whole
    bundle = build_bundle(asyncio.run(_two_hosts(controls, 2)))
    publish_bundle(bundle, controls.output, controls.replay_output, controls.summary_output)
    published = (
        Path(controls.output).read_bytes(),
        Path(controls.replay_output).read_bytes(),
        Path(controls.summary_output).read_bytes(),
    )
    assert published == whole


def test_a_range_outside_the_plan_is_refused(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    controls = _controls(servers, tmp_path)

    async def run(groups: range) -> None:
        async with inspect_environments(controls) as found:
            await run_groups(found, controls, RandomPolicy(), groups)

    for groups in (range(2, GROUPS + 1), range(-1, 2), range(3, 2), range(0, 4, 2)):
        with pytest.raises(UsageError, match="a group range must be"):
            asyncio.run(run(groups))


def _assembled(
    controls: CollectionControls, change: Any = None, drop: int | None = None, **kwargs: Any
) -> Collection:
    async def run() -> Collection:
        policy = RandomPolicy()
        async with inspect_environments(controls) as found:
            groups = await run_groups(found, controls, policy)
            if drop is not None:
                del groups[drop]
            again = await found.reinspect()
            if change is not None:
                again = [change(entry) for entry in again]
            return assemble_collection(
                controls, found, behavior_identity(policy), groups, again, **kwargs
            )

    return asyncio.run(run())


def test_groups_that_miss_part_of_the_plan_are_refused(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    controls = _controls(servers, tmp_path)
    with pytest.raises(UsageError, match="4 groups assembled for a plan of 5"):
        _assembled(controls, drop=2)


def test_an_environment_that_changed_is_refused(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    controls = _controls(servers, tmp_path)

    def moved(entry: Any) -> Any:
        identity, schema = entry
        return identity.model_copy(update={"openapi_version": "9.9"}), schema

    with pytest.raises(EnvironmentIdentityChanged, match=r"during the step; .*openapi_version"):
        _assembled(controls, change=moved, during="the step")


def test_assembly_checks_integrity_in_the_assembler_s_terms(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    controls = _controls(servers, tmp_path)
    policy = RandomPolicy()

    async def run(**kwargs: Any) -> Collection:
        async with inspect_environments(controls) as found:
            groups = await run_groups(found, controls, policy)
            assert all(group.checked for group in groups)  # as they ended: not twice
            # candidate 2 of group 1 carries group 0's start: not the same reset
            odd = dataclasses.replace(
                groups[1].episodes[2],
                messages=groups[0].messages,
                reset_observation=groups[0].reset_observation,
            )
            episodes = [*groups[1].episodes[:2], odd]
            groups[1] = dataclasses.replace(groups[1], episodes=episodes)
            assert not groups[1].checked  # a changed copy is checked again
            again = await found.reinspect()
            return assemble_collection(
                controls, found, behavior_identity(policy), groups, again, **kwargs
            )

    with pytest.raises(ResetNondeterministic, match=r"group 1 .* candidate 2 got"):
        asyncio.run(run())

    def own(group: CollectedGroup, candidate: int) -> Exception:
        return RuntimeError(f"{group.plan.group_index}/{candidate}")

    with pytest.raises(RuntimeError, match=r"^1/2$"):
        asyncio.run(run(different_reset_error=own))
