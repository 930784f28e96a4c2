"""`kiln-verify openenv rollout`: collect an OpenEnv rollout bundle (three files).

Flags follow kiln-openenv-contract §11 (rollout table) plus ``--policy`` /
``--policy-option`` for the behaviour policy. With no ``--environment`` the embedded
oracle (``bandit`` unless ``--oracle NAME``) is started in-process on a free loopback port
and the ``random`` policy plays it: ``kiln-verify openenv rollout`` alone writes a complete
bundle into the current directory. ``--grpo-output PATH`` adds the GRPO training corpus
(docs/contract.md, "GRPO corpus from a rollout") to the same all-or-nothing publication.
Exit status: 0 published, 1 collection or contract
failure (nothing published), 2 usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kiln_verify.cli import collection_options as opts
from kiln_verify.errors import KilnError
from kiln_verify.openenv.collect import (
    DEFAULT_DATASET,
    DEFAULT_REPLAY,
    DEFAULT_SUMMARY,
    Bundle,
    CollectionControls,
    ProgressEvent,
    grpo_tokenizer,
    run_collection,
)
from kiln_verify.openenv.policy.registry import POLICY_NAMES, build_policy, parse_policy_options

__all__ = ["register"]


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


def rollout_command(
    environment: opts.Environment = None,
    credential_env: opts.CredentialEnv = None,
    reset_options: opts.ResetOptions = None,
    environment_reset_options: opts.EnvironmentResetOptions = None,
    groups: Annotated[int, typer.Option("--groups", help="Groups (one seed each).")] = 8,
    group_size: Annotated[int, typer.Option("--group-size", help="Candidates per group.")] = 4,
    seed_start: opts.SeedStart = 0,
    max_steps: opts.MaxSteps = 8,
    concurrency: opts.Concurrency = 4,
    max_action_tokens: opts.MaxActionTokens = 256,
    thinking_budget_tokens: opts.ThinkingBudgetTokens = None,
    temperature: opts.Temperature = 1.0,
    thinking: opts.Thinking = "true",
    protocol_error_reward: opts.ProtocolErrorReward = -1.0,
    max_recoverable_errors: opts.MaxRecoverableErrors = 3,
    capacity_wait_seconds: opts.CapacityWaitSeconds = 300,
    output: Annotated[str, typer.Option("--output", help="Corpus JSONL path.")] = DEFAULT_DATASET,
    replay_output: Annotated[
        str, typer.Option("--replay-output", help="Replay path.")
    ] = DEFAULT_REPLAY,
    summary_output: Annotated[
        str, typer.Option("--summary-output", help="Summary path.")
    ] = DEFAULT_SUMMARY,
    force: opts.Force = False,
    grpo_output: Annotated[
        str | None,
        typer.Option(
            "--grpo-output",
            help=(
                "Also write the GRPO training corpus (rows for `hf export-grpo`); needs "
                "--max-steps 1, --group-size >= 2 and a policy with token provenance."
            ),
        ),
    ] = None,
    policy: Annotated[
        str, typer.Option("--policy", help=f"Behaviour policy: {'|'.join(POLICY_NAMES)}.")
    ] = "random",
    policy_option: Annotated[
        list[str] | None,
        typer.Option(
            "--policy-option", help="KEY=VALUE policy option (repeat; see docs/policies.md)."
        ),
    ] = None,
    oracle: Annotated[
        str | None,
        typer.Option(
            "--oracle", help="Embedded oracle to collect from when no --environment is given."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print paths and statistics as JSON.")
    ] = False,
) -> None:
    """Collect rollouts into a corpus, a replay manifest and a summary, published together."""
    try:
        embedded = opts.EmbeddedOracle.from_flags(environment, oracle)
        controls = opts.build_controls(
            environment=environment,
            credential_env=credential_env,
            reset_options=reset_options,
            environment_reset_options=environment_reset_options,
            groups=groups,
            group_size=group_size,
            seed_start=seed_start,
            max_steps=max_steps,
            concurrency=concurrency,
            max_action_tokens=max_action_tokens,
            thinking_budget_tokens=thinking_budget_tokens,
            temperature=temperature,
            thinking=thinking,
            protocol_error_reward=protocol_error_reward,
            max_recoverable_errors=max_recoverable_errors,
            capacity_wait_seconds=capacity_wait_seconds,
            output=output,
            replay_output=replay_output,
            summary_output=summary_output,
            force=force,
            grpo_output=grpo_output,
        )
        behaviour = build_policy(policy, parse_policy_options(policy_option or []))
        grpo_tokenizer(controls, behaviour)  # refuse before the oracle or any server is used
        with embedded.serve(controls) as live:
            bundle = _collect(live, behaviour, show_progress=not as_json and sys.stderr.isatty())
    except KilnError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    if as_json:
        report = {
            "summary": controls.summary_output,
            "dataset": controls.output,
            "replay": controls.replay_output,
            "stats": bundle.record.stats.to_json(),
        }
        if controls.grpo_output is not None:
            report["grpo"] = controls.grpo_output
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    Console().print(_table(bundle, controls.grpo_output))


def _collect(controls: CollectionControls, policy: Any, *, show_progress: bool) -> Bundle:
    async def main(hook: Any) -> Bundle:
        try:
            return await run_collection(controls, policy, progress=hook)
        finally:
            await policy.aclose()

    if not show_progress:
        return asyncio.run(main(None))
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        group_task = bar.add_task("groups", total=controls.groups)
        episode_task = bar.add_task("episodes", total=controls.rollout_count)

        def hook(event: ProgressEvent) -> None:
            if event.stage == "group":
                bar.update(group_task, completed=event.completed)
            elif event.stage == "episode":
                bar.update(episode_task, completed=event.completed)
            else:
                bar.update(group_task, description=f"groups ({event.stage})")

        return asyncio.run(main(hook))


def register(app: typer.Typer) -> None:
    """Add the ``rollout`` command to the ``openenv`` command group."""
    app.command("rollout")(rollout_command)
