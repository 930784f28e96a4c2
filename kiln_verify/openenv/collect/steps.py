"""Collection in steps that other code combines: inspect, run groups, assemble, publish.

A collection used to be one coroutine; its parts are now steps, so that a caller can run
part of a plan (a shard: groups ``[a, b)``), assemble groups it ran itself (the TRL
recorder runs its episodes inside TRL's own loop) or publish somewhere else (the control
plane's run directory) without re-implementing the rules in between:

1. :func:`inspect_environments` (an async context manager): open one client per
   environment and inspect them concurrently (health, the four discovery documents, the
   compiled action schema); the clients stay open for the steps inside it.
2. :func:`run_groups`: run groups ``[a, b)`` of the deterministic plan (group ``g``: seed
   ``seed_start + g``, environment ``g mod n``, wherever the range starts), one group at a
   time in plan order, each group's candidates concurrently (at most ``min(concurrency,
   group_size)`` in flight), results in candidate order. A group that breaks integrity
   fails at once, before the next group runs.
3. :func:`assemble_collection`: the groups cover the plan; every group passes the
   integrity rule (checked here unless :func:`run_groups` checked it as it ended); the
   environments, inspected again, equal their first inspection (revalidation,
   :func:`~.engine.check_unchanged`); then the :class:`~.engine.Collection` record.
   Shards run in one :func:`inspect_environments` or in several (other hosts, the
   environments unchanged) assemble into the bytes of one run of all the groups.
4. :func:`publish_bundle`: the built bundle's files appear together or not at all.

:func:`collect` is steps 1-3 over the whole plan (``run_collection`` adds building and
step 4); the control plane's executor and TRL's ``rollout_func`` call it, the TRL factory's
recorder calls :func:`assemble_collection` on the episodes TRL ran. Any failure raises a
typed error and leaves nothing to publish.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass

from kiln_verify.core.publisher import OUTPUT, publish_files
from kiln_verify.errors import UsageError
from kiln_verify.openenv.collect.bundle import Bundle
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.engine import (
    CollectedGroup,
    Collection,
    ProgressEvent,
    ProgressHook,
    Reinspection,
    arrival,
    behavior_identity,
    check_integrity,
    check_unchanged,
    first_different,
    gather_or_cancel,
    inspection_record,
)
from kiln_verify.openenv.collect.environment import EnvironmentContext
from kiln_verify.openenv.collect.episode import Arrival, EpisodeResult, run_episode
from kiln_verify.openenv.collect.groupcheck import GroupCheck, different_reset
from kiln_verify.openenv.collect.plan import GroupPlan, ResetPlan, RetainedBudget, group_plan
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.protocol.client import Inspection, OpenEnvClient
from kiln_verify.records import BehaviorPolicyIdentity

__all__ = [
    "DifferentReset",
    "Environments",
    "assemble_collection",
    "collect",
    "inspect_environments",
    "publish_bundle",
    "run_groups",
]

DifferentReset = Callable[[CollectedGroup, int], Exception]
"""``(group, candidate_index)`` -> the error to raise for a group that broke integrity
(the collector's ``reset_nondeterministic`` unless the assembler names its own)."""


def _silent(event: ProgressEvent) -> None:
    del event


@dataclass(frozen=True, slots=True)
class Environments:
    """The inspected environments of one collection, aligned with ``controls.environments``:
    the open clients, their first inspections, and the contexts episodes run against."""

    clients: tuple[OpenEnvClient, ...]
    inspections: tuple[Inspection, ...]
    contexts: tuple[EnvironmentContext, ...]

    @property
    def first(self) -> list[Reinspection]:
        """The first inspections as revalidation compares them."""
        return [(found.identity, found.environment_schema) for found in self.inspections]

    async def reinspect(self) -> list[Reinspection]:
        """Every environment inspected again, concurrently (for revalidation)."""
        again = await gather_or_cancel([client.inspect() for client in self.clients])
        return [(found.identity, found.environment_schema) for found in again]


@contextlib.asynccontextmanager
async def inspect_environments(
    controls: CollectionControls,
    *,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
) -> AsyncIterator[Environments]:
    """Open a client per environment (``controls.access(environ)``: its credential slot),
    inspect them all (``discovering``) and hold the clients open for the steps inside."""
    notify = progress or _silent
    access = controls.access(environ)
    async with contextlib.AsyncExitStack() as stack:
        clients: list[OpenEnvClient] = []
        for index, url in enumerate(controls.environments):
            client = access.client(index, url)
            await stack.enter_async_context(client)
            clients.append(client)
        notify(ProgressEvent("discovering"))
        first = await gather_or_cancel([client.inspect() for client in clients])
        contexts = [
            EnvironmentContext(index, client, inspection_record(found), found.action_schema)
            for index, (client, found) in enumerate(zip(clients, first, strict=True))
        ]
        yield Environments(tuple(clients), tuple(first), tuple(contexts))


def _group_range(controls: CollectionControls, groups: range | None) -> range:
    total = controls.options.groups
    if groups is None:
        return range(total)
    if groups.step != 1 or not 0 <= groups.start <= groups.stop <= total:
        raise UsageError(
            f"a group range must be [a, b) with 0 <= a <= b <= {total} (the plan's groups), "
            f"not {groups}"
        )
    return groups


def _charged(budget: RetainedBudget, reset_plan: ResetPlan) -> RetainedBudget:
    """``budget`` charged with what every group of the collection shares."""
    for template in reset_plan.templates:
        budget.charge(template, what="a reset template")
    return budget


async def run_groups(
    environments: Environments,
    controls: CollectionControls,
    policy: Policy,
    groups: range | None = None,
    *,
    behavior: BehaviorPolicyIdentity | None = None,
    budget: RetainedBudget | None = None,
    progress: ProgressHook | None = None,
    on_group: Callable[[CollectedGroup], None] | None = None,
) -> list[CollectedGroup]:
    """Run groups ``groups`` (default: all of the plan) and return them in plan order.

    ``progress`` hears ``collecting``, then ``episode`` and ``group`` counts out of this
    range's episodes and groups. ``budget`` is the collection's retained budget (a fresh
    one charged with the reset templates when not given); ``behavior`` the policy's
    identity (computed when not given). ``on_group`` is called with each group as it
    passes integrity, before the next group starts (the journal writes it there).
    """
    notify = progress or _silent
    planned = _group_range(controls, groups)
    options = controls.options
    reset_plan = ResetPlan.from_templates(controls.reset_templates)
    if budget is None:
        budget = _charged(RetainedBudget(), reset_plan)
    if behavior is None:
        behavior = behavior_identity(policy)
    episodes_total = len(planned) * options.group_size
    notify(ProgressEvent("collecting", 0, len(planned)))
    semaphore = asyncio.Semaphore(options.in_flight)
    collected: list[CollectedGroup] = []
    finished = 0

    async def candidate(
        env: EnvironmentContext, plan: GroupPlan, index: int, arrive: Arrival | None
    ) -> EpisodeResult | None:
        nonlocal finished
        async with semaphore:
            result = await run_episode(
                env,
                plan,
                index,
                controls=controls,
                policy=policy,
                behavior=behavior,
                budget=budget,
                arrival=arrive,
            )
        if result is not None:
            finished += 1
            notify(ProgressEvent("episode", finished, episodes_total))
        return result

    # A group of one has nothing to compare its state with.
    checked = options.state_check and options.group_size > 1
    for plan in group_plan(reset_plan, planned.stop, options.seed_start, first=planned.start):
        env = environments.contexts[plan.environment_index]
        url = env.inspection.identity.base_url
        budget.charge(plan.reset_payload, what="a reset payload")
        arrive = arrival(GroupCheck(plan, options.group_size, url)) if checked else None
        results = await gather_or_cancel(
            [candidate(env, plan, index, arrive) for index in range(options.group_size)]
        )
        # A candidate stops (None) only in a failing group, whose last arrival raised.
        episodes = [result for result in results if result is not None]
        if len(episodes) != len(results):
            raise AssertionError("a group's check stopped a candidate but did not fail")
        if arrive is None:
            check_integrity(plan, episodes, url)
        # checked: on arrival (the hidden-state check compares the starts) or just now
        collected.append(CollectedGroup.checked_group(plan, episodes))
        if on_group is not None:
            on_group(collected[-1])
        notify(ProgressEvent("group", len(collected), len(planned)))
    return collected


def _check_plan(controls: CollectionControls, groups: Sequence[CollectedGroup]) -> None:
    """The groups are the plan's, in order, whole: group ``g`` at position ``g``, with seed
    ``seed_start + g`` and environment ``g mod n`` (shards that miss or repeat a group
    would otherwise build a bundle its summary misdescribes)."""
    options = controls.options
    count = len(controls.environments)
    if len(groups) != options.groups:
        raise UsageError(f"{len(groups)} groups assembled for a plan of {options.groups}")
    for index, group in enumerate(groups):
        plan = group.plan
        if (plan.group_index, plan.seed, plan.environment_index) != (
            index,
            options.seed_start + index,
            index % count,
        ) or len(group.episodes) != options.group_size:
            raise UsageError(f"the group at position {index} is not group {index} of the plan")


def assemble_collection(
    controls: CollectionControls,
    environments: Environments,
    behavior: BehaviorPolicyIdentity,
    groups: Sequence[CollectedGroup],
    again: Sequence[Reinspection] | Callable[[], Sequence[Reinspection]],
    *,
    during: str = "collection",
    different_reset_error: DifferentReset | None = None,
) -> Collection:
    """The :class:`Collection` of ``groups``, once they pass every rule (module text, 3).

    ``again`` is every environment inspected after the last group, or a function giving
    it, called only once the groups passed integrity (a re-inspection still running
    elsewhere is waited for only then). ``during`` names the work in the revalidation
    error; ``different_reset_error`` builds the integrity error of an assembler that
    reports in its own terms.
    """
    _check_plan(controls, groups)
    for group in groups:
        if group.checked:  # run_groups compared its starts as it ended: not twice
            continue
        different = first_different(group.episodes)
        if different is not None:
            if different_reset_error is not None:
                raise different_reset_error(group, different)
            env = environments.contexts[group.plan.environment_index]
            raise different_reset(group.plan, env.inspection.identity.base_url, different)
    check_unchanged(environments.first, again() if callable(again) else again, during=during)
    return Collection(
        controls,
        ResetPlan.from_templates(controls.reset_templates),
        [context.inspection for context in environments.contexts],
        behavior,
        list(groups),
    )


def publish_bundle(
    bundle: Bundle,
    dataset: str | os.PathLike[str],
    replay: str | os.PathLike[str],
    summary: str | os.PathLike[str],
    *,
    grpo: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> None:
    """Publish the bundle's three files (and its GRPO corpus at ``grpo``) all or none."""
    files: list[tuple[str | os.PathLike[str], bytes]] = [
        (dataset, bundle.dataset),
        (replay, bundle.replay),
        (summary, bundle.summary),
    ]
    if grpo is not None:
        if bundle.grpo is None:
            raise UsageError("a GRPO output path was given for a bundle without a GRPO corpus")
        files.append((grpo, bundle.grpo))
    publish_files(files, force=force, wording=OUTPUT)


async def collect(
    controls: CollectionControls,
    policy: Policy,
    *,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
    budget: RetainedBudget | None = None,
) -> Collection:
    """Steps 1-3 over the whole plan; raises a typed error and returns nothing on any failure.

    The reset templates are charged and the policy's identity taken before any network
    contact, as they always were.
    """
    notify = progress or _silent
    reset_plan = ResetPlan.from_templates(controls.reset_templates)
    budget = _charged(budget or RetainedBudget(), reset_plan)
    behavior = behavior_identity(policy)
    async with inspect_environments(controls, environ=environ, progress=progress) as found:
        groups = await run_groups(
            found, controls, policy, behavior=behavior, budget=budget, progress=progress
        )
        notify(ProgressEvent("revalidating"))
        again = await found.reinspect()
        return assemble_collection(controls, found, behavior, groups, again)
