"""`kiln-verify openenv rollout`: collect an OpenEnv rollout bundle (three files).

Flags follow kiln-openenv-contract §11 (rollout table) plus ``--policy`` /
``--policy-option`` for the behaviour policy; the collection flags are built from
:class:`~kiln_verify.openenv.collect.CollectionOptions` (``collection_options``). With no
``--environment`` the embedded oracle (``bandit`` unless ``--oracle NAME``) is started
in-process on a free loopback port and the ``random`` policy plays it: ``kiln-verify
openenv rollout`` alone writes a complete bundle into the current directory.
``--grpo-output PATH`` adds the GRPO training corpus (docs/contract.md, "GRPO corpus from a
rollout") to the same all-or-nothing publication. Every output path is checked before the
policy is built or any server is contacted. Exit status: 0 published, 1 collection or
contract failure (nothing published), 2 usage, 130 interrupted (nothing published).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kiln_verify.cli import collection_options as opts
from kiln_verify.cli.help import one_of
from kiln_verify.cli.openenv_rollout_ray import DEFAULT_RAY_RETRIES, ExecutorFlags, collect_on_ray
from kiln_verify.cli.output import fail, print_json
from kiln_verify.cli.progress import CollectionProgress, run_interruptible
from kiln_verify.errors import Interrupted, KilnError, UsageError
from kiln_verify.openenv.collect import (
    DEFAULT_DATASET,
    DEFAULT_REPLAY,
    DEFAULT_SUMMARY,
    Bundle,
    CollectionControls,
    check_outputs,
    grpo_tokenizer,
    run_collection,
)
from kiln_verify.openenv.policy.registry import POLICY_NAMES, build_policy, parse_policy_options

if TYPE_CHECKING:
    from kiln_verify.openenv.collect.journaled import JournaledCollection
    from kiln_verify.openenv.policy.base import Policy

__all__ = ["register"]

PolicyName = Annotated[
    str,
    typer.Option("--policy", metavar="NAME", help=f"Behaviour policy: {one_of(POLICY_NAMES)}."),
]
PolicyOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--policy-option",
        metavar="KEY=VALUE",
        help="Policy option (repeat; see docs/policies.md).",
    ),
]


def _table(bundle: Bundle, grpo_output: str | None = None) -> Table:
    stats = bundle.record.stats
    table = Table(title="OpenEnv rollout collection", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    rows = [
        ("rollouts", str(bundle.record.rollout_count)),
        ("mean return", f"{stats.mean_episode_return:.6g}"),
        ("min / max return", f"{stats.min_episode_return} / {stats.max_episode_return}"),
        (
            "terminations",
            f"done {stats.done_count}, max_steps {stats.max_steps_count}, "
            f"invalid_model_action {stats.invalid_model_action_count}, "
            f"protocol_error {stats.protocol_error_count}",
        ),
        ("recoverable protocol errors", str(stats.recoverable_protocol_error_count)),
        ("capacity retries", str(stats.capacity_retry_count)),
        ("environment steps", str(stats.total_environment_steps)),
        ("model tokens", str(stats.total_model_tokens)),
        ("mean model latency (ms)", f"{stats.mean_model_latency_ms:.3f}"),
        ("dataset", bundle.record.output_path),
        ("replay", bundle.record.replay_output_path),
        ("summary", bundle.record.summary_output_path),
    ]
    if grpo_output is not None:
        rows.append(("grpo corpus", grpo_output))
    for key, value in rows:
        table.add_row(key, value)
    return table


@dataclass(frozen=True, slots=True)
class _Command:
    """What the three paths of one command line share (built once by :func:`_rollout`):
    the collection flags, the outputs, the behaviour policy's name and options, ``--json``."""

    flags: opts.CollectionFlags
    output: str
    replay_output: str
    summary_output: str
    force: bool
    grpo_output: str | None
    policy: str
    policy_options: tuple[str, ...]
    as_json: bool

    def controls(self) -> CollectionControls:
        """The flags' controls with this command line's outputs."""
        return dataclasses.replace(
            self.flags.controls(),
            output=self.output,
            replay_output=self.replay_output,
            summary_output=self.summary_output,
            force=self.force,
            grpo_output=self.grpo_output,
        )

    def behaviour(self) -> Policy:
        """The behaviour policy, built (a model-backed one loads its model here)."""
        return build_policy(self.policy, parse_policy_options(list(self.policy_options)))

    @property
    def show_bar(self) -> bool:
        return not self.as_json and sys.stderr.isatty()


def _rollout(
    flags: opts.CollectionFlags,
    output: Annotated[
        str, typer.Option("--output", metavar="PATH", help="Corpus JSONL path.")
    ] = DEFAULT_DATASET,
    replay_output: Annotated[
        str, typer.Option("--replay-output", metavar="PATH", help="Replay manifest path.")
    ] = DEFAULT_REPLAY,
    summary_output: Annotated[
        str, typer.Option("--summary-output", metavar="PATH", help="Summary (receipt) path.")
    ] = DEFAULT_SUMMARY,
    force: opts.Force = False,
    grpo_output: Annotated[
        str | None,
        typer.Option(
            "--grpo-output",
            metavar="PATH",
            help=(
                "Also write the GRPO training corpus (rows for `hf export-grpo`); needs "
                "--max-steps 1, --group-size >= 2 and a policy with token provenance."
            ),
        ),
    ] = None,
    policy: PolicyName = "random",
    policy_option: PolicyOptions = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print paths and statistics (or the error) as JSON.")
    ] = False,
    journal: Annotated[
        str | None,
        typer.Option(
            "--journal",
            metavar="DIR",
            help="Journal each finished group into DIR (docs/resume-and-shards.md).",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the collection journaled in --journal.")
    ] = False,
    groups_range: Annotated[
        str | None,
        typer.Option(
            "--groups-range",
            metavar="A:B",
            help="Collect groups A..B-1 of the plan into --journal: a shard for `openenv merge`.",
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            metavar="local|ray",
            help="Run the groups in this process, or on Ray workers (docs/ray.md).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDR",
            help="Ray cluster to use (default: one started on this machine for the run).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", metavar="N", help="Group ranges for Ray (default: the cluster's CPUs)."
        ),
    ] = None,
    ray_retries: Annotated[
        int,
        typer.Option(
            "--ray-retries",
            metavar="N",
            help="Times a range whose Ray worker died is collected again.",
        ),
    ] = DEFAULT_RAY_RETRIES,
) -> None:
    """Collect rollouts into a corpus, a replay manifest and a summary, published together."""
    command = _Command(
        flags,
        output,
        replay_output,
        summary_output,
        force,
        grpo_output,
        policy,
        tuple(policy_option or ()),
        as_json,
    )
    placement = ExecutorFlags(executor, ray_address, workers, ray_retries)
    try:
        placement.check(
            environments=bool(flags.environment),
            journaled=journal is not None or resume or groups_range is not None,
        )
    except KilnError as exc:
        fail(exc, as_json=as_json)
    if placement.ray:
        _on_ray(command, placement)
        return
    if journal is not None or resume or groups_range is not None:
        _journaled(command, journal, resume, groups_range)
        return
    try:
        embedded = flags.embedded()
        controls = command.controls()
        check_outputs(controls)  # before the policy loads a model or a server is contacted
        behaviour = command.behaviour()
        grpo_tokenizer(controls, behaviour)  # refuse before the oracle or any server is used
        with embedded.serve(controls) as live:
            bundle = _collect(live, behaviour, show_bar=command.show_bar)
    except KilnError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        report: dict[str, Any] = {
            "summary": controls.summary_output,
            "dataset": controls.output,
            "replay": controls.replay_output,
            "stats": bundle.record.stats.to_json(),
        }
        if controls.grpo_output is not None:
            report["grpo"] = controls.grpo_output
        print_json(report)
        return
    Console().print(_table(bundle, controls.grpo_output))


def _on_ray(command: _Command, placement: ExecutorFlags) -> None:
    """``--executor ray``: the plan's ranges on Ray workers, merged and published here."""
    try:
        controls = command.controls()
        bundle = collect_on_ray(controls, command.policy, list(command.policy_options), placement)
    except KilnError as exc:
        fail(exc, as_json=command.as_json)
    if command.as_json:
        print_json(
            {
                "summary": controls.summary_output,
                "dataset": controls.output,
                "replay": controls.replay_output,
                "executor": "ray",
                "stats": bundle.record.stats.to_json(),
            }
        )
        return
    Console().print(_table(bundle))


def _groups_range(text: str | None) -> range | None:
    if text is None:
        return None
    start, colon, stop = text.partition(":")
    if not colon or not start.isdigit() or not stop.isdigit():
        raise UsageError(
            f"`groups_range` must be A:B (two group numbers), not {text!r}",
            fields=("groups_range",),
        )
    return range(int(start), int(stop))


def _journaled(
    command: _Command, journal: str | None, resume: bool, groups_range: str | None
) -> None:
    """``--journal``/``--resume``/``--groups-range``: the journaled collection."""
    as_json = command.as_json
    try:
        if journal is None:
            raise UsageError("`resume` and `groups_range` need `journal`", fields=("journal",))
        if not command.flags.environment:
            raise UsageError(
                "`journal` needs `environments`: the embedded oracle listens on a new port "
                "each run, so a journal of it could never be resumed",
                fields=("journal", "environments"),
            )
        groups = _groups_range(groups_range)
        controls = command.controls()
        if groups is None and not resume:
            check_outputs(controls)  # before the policy loads a model
        behaviour = command.behaviour()
        done, bundle = _collect_journaled(
            controls, behaviour, journal, resume, groups, show_bar=command.show_bar
        )
    except KilnError as exc:
        if isinstance(exc, Interrupted):  # the journal keeps every group it holds
            exc.hint = "run the same command with --resume to continue from the journal"
        fail(exc, as_json=as_json)
    if bundle is None:
        report: dict[str, Any] = {
            "journal": journal,
            "groups_range": [done.groups.start, done.groups.stop],
            "resumed_groups": done.resumed,
        }
        if as_json:
            print_json(report)
        else:
            Console().print(
                f"shard sealed: groups {done.groups.start}..{done.groups.stop - 1} in {journal} "
                f"({done.resumed} read back from the journal)"
            )
        return
    if as_json:
        print_json(
            {
                "summary": controls.summary_output,
                "dataset": controls.output,
                "replay": controls.replay_output,
                "journal": journal,
                "resumed_groups": done.resumed,
                "stats": bundle.record.stats.to_json(),
            }
        )
        return
    Console().print(_table(bundle))


def _collect_journaled(
    controls: CollectionControls,
    policy: Any,
    journal: str,
    resume: bool,
    groups: range | None,
    *,
    show_bar: bool,
) -> tuple[JournaledCollection, Bundle | None]:
    from kiln_verify.openenv.collect.journaled import run_journaled

    planned = len(groups) if groups is not None else controls.options.groups
    progress = CollectionProgress("rollout", planned, planned * controls.options.group_size)
    with progress.renderer(terminal=show_bar) as hook:

        async def main() -> tuple[JournaledCollection, Bundle | None]:
            try:
                return await run_journaled(
                    controls, policy, journal, resume=resume, groups=groups, progress=hook
                )
            finally:
                await policy.aclose()

        return run_interruptible(main, progress, outputs=controls.summary_output)


def _collect(controls: CollectionControls, policy: Any, *, show_bar: bool) -> Bundle:
    progress = CollectionProgress(
        "rollout", controls.options.groups, controls.options.rollout_count
    )
    with progress.renderer(terminal=show_bar) as hook:

        async def main() -> Bundle:
            try:
                return await run_collection(controls, policy, progress=hook)
            finally:
                await policy.aclose()

        return run_interruptible(main, progress, outputs=controls.summary_output)


rollout_command = opts.collection_command(
    _rollout, oracle_help="Embedded oracle to collect from when no --environment is given."
)


def register(app: typer.Typer) -> None:
    """Add the ``rollout`` command to the ``openenv`` command group."""
    app.command("rollout")(rollout_command)
