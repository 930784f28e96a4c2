"""`kiln-verify openenv rollout`: collect an OpenEnv rollout bundle (three files).

Flags follow kiln-openenv-contract §11 (rollout table) plus ``--policy`` /
``--policy-option`` for the behaviour policy. With no ``--environment`` the embedded
oracle (``bandit`` unless ``--oracle NAME``) is started in-process on a free loopback port
and the ``random`` policy plays it: ``kiln-verify openenv rollout`` alone writes a complete
bundle into the current directory. Exit status: 0 published, 1 collection or contract
failure (nothing published), 2 usage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kiln_verify.errors import KilnError, UsageError
from kiln_verify.openenv.collect import (
    DEFAULT_DATASET,
    DEFAULT_REPLAY,
    DEFAULT_SUMMARY,
    Bundle,
    CollectionControls,
    ProgressEvent,
    load_reset_options,
    run_collection,
)
from kiln_verify.openenv.policy.registry import POLICY_NAMES, build_policy, parse_policy_options

__all__ = ["register"]

_PLACEHOLDER_URL = "http://127.0.0.1:1"


def _parse_bool(flag: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"{flag} takes true or false, not {text[:32]!r}")


def _templates(shared: str | None, per_environment: list[str]) -> list[dict[str, Any]] | None:
    if shared is not None and per_environment:
        raise UsageError(
            "--reset-options and --environment-reset-options are mutually exclusive",
            hint="give one shared object or one object per --environment",
        )
    if shared is not None:
        return [load_reset_options(shared)]
    if per_environment:
        return [load_reset_options(path) for path in per_environment]
    return None


def _table(bundle: Bundle) -> Table:
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
    for key, value in rows:
        table.add_row(key, value)
    return table


def rollout_command(
    environment: Annotated[
        list[str] | None,
        typer.Option("--environment", help="OpenEnv base URL (repeat; groups rotate round-robin)."),
    ] = None,
    credential_env: Annotated[
        list[str] | None,
        typer.Option(
            "--credential-env", help="Bearer-token variable NAME per --environment; '-' = public."
        ),
    ] = None,
    reset_options: Annotated[
        str | None,
        typer.Option(
            "--reset-options", help="JSON object FILE merged into every reset (seed is set)."
        ),
    ] = None,
    environment_reset_options: Annotated[
        list[str] | None,
        typer.Option(
            "--environment-reset-options", help="Per-environment reset FILE (repeat; '-' = {})."
        ),
    ] = None,
    groups: Annotated[int, typer.Option("--groups", help="Groups (one seed each).")] = 8,
    group_size: Annotated[int, typer.Option("--group-size", help="Candidates per group.")] = 4,
    seed_start: Annotated[
        int, typer.Option("--seed-start", help="Seed of group 0; +1 per group.")
    ] = 0,
    max_steps: Annotated[
        int, typer.Option("--max-steps", help="Model actions per episode at most.")
    ] = 8,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Candidate sessions at once.")
    ] = 4,
    max_action_tokens: Annotated[
        int, typer.Option("--max-action-tokens", help="Tokens per action.")
    ] = 256,
    thinking_budget_tokens: Annotated[
        int | None,
        typer.Option(
            "--thinking-budget-tokens", help="Thinking token budget (needs --thinking true)."
        ),
    ] = None,
    temperature: Annotated[
        float, typer.Option("--temperature", help="Sampling temperature.")
    ] = 1.0,
    thinking: Annotated[
        str, typer.Option("--thinking", help="true|false: thinking mode.")
    ] = "true",
    protocol_error_reward: Annotated[
        float,
        typer.Option(
            "--protocol-error-reward", help="Penalty per protocol error or invalid action."
        ),
    ] = -1.0,
    max_recoverable_errors: Annotated[
        int,
        typer.Option(
            "--max-recoverable-errors", help="Recoverable errors an episode may continue after."
        ),
    ] = 3,
    capacity_wait_seconds: Annotated[
        int,
        typer.Option("--capacity-wait-seconds", help="How long to wait for a free session slot."),
    ] = 300,
    output: Annotated[str, typer.Option("--output", help="Corpus JSONL path.")] = DEFAULT_DATASET,
    replay_output: Annotated[
        str, typer.Option("--replay-output", help="Replay path.")
    ] = DEFAULT_REPLAY,
    summary_output: Annotated[
        str, typer.Option("--summary-output", help="Summary path.")
    ] = DEFAULT_SUMMARY,
    force: Annotated[bool, typer.Option("--force", help="Replace existing output files.")] = False,
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
    handle = None
    try:
        if oracle is not None and environment:
            raise UsageError("--oracle only applies when no --environment is given")
        if not environment and credential_env:
            raise UsageError("--credential-env needs --environment")
        controls = CollectionControls.create(
            environment or [_PLACEHOLDER_URL],
            reset_templates=_templates(reset_options, environment_reset_options or []),
            credential_envs=[None if slot == "-" else slot for slot in credential_env or []],
            groups=groups,
            group_size=group_size,
            seed_start=seed_start,
            max_steps=max_steps,
            concurrency=concurrency,
            max_action_tokens=max_action_tokens,
            thinking_budget_tokens=thinking_budget_tokens,
            temperature=temperature,
            thinking=_parse_bool("--thinking", thinking),
            protocol_error_reward=protocol_error_reward,
            max_recoverable_errors=max_recoverable_errors,
            capacity_wait_seconds=capacity_wait_seconds,
            output=output,
            replay_output=replay_output,
            summary_output=summary_output,
            force=force,
        )
        behaviour = build_policy(policy, parse_policy_options(policy_option or []))
        if not environment:
            from oracle.runner import ServerConfig, start_server

            try:
                handle = start_server(ServerConfig(oracle or "bandit"))
            except (KeyError, ValueError) as exc:
                raise UsageError(f"cannot start the embedded oracle: {exc}") from None
            controls = dataclasses.replace(controls, environments=(handle.base_url,))
        bundle = _collect(controls, behaviour, show_progress=not as_json and sys.stderr.isatty())
    except KilnError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    finally:
        if handle is not None:
            handle.stop()
    if as_json:
        report = {
            "summary": controls.summary_output,
            "dataset": controls.output,
            "replay": controls.replay_output,
            "stats": bundle.record.stats.to_json(),
        }
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    Console().print(_table(bundle))


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
