"""`kiln-verify openenv evaluate`: paired held-out evaluation of two policies (contract §9).

Live form: the rollout collection flags (defaults as ``openenv rollout`` except groups 20
and group size 1; ``--seed-start`` defaults to right after a declared training interval,
else 0) plus ``--baseline-policy``/``--candidate-policy`` (and their ``-option KEY=VALUE``)
collect ``DIR/baseline/`` then ``DIR/candidate/`` with identical options and write
``DIR/receipt.json`` (``--output-dir``, default ``openenv-evaluation``; no file is
replaced without ``--force``). Without ``--environment`` the embedded oracle (``bandit``
unless ``--oracle NAME``) is served in-process and both policies play the same server.
Offline form: ``--baseline-summary PATH --candidate-summary PATH`` verifies both bundles
and computes the receipt (written to ``--receipt PATH`` or ``--output-dir DIR``, else only
printed).

Gate: ``--min-mean-improvement X`` (>= 0) and/or ``--min-mean-return X``; without either
the decision is ``diagnostic``. ``--training-seed-start N --training-groups N`` declare
the training interval; overlapping evaluation seeds are a usage error (before any network
contact).

Exit status: 0 receipt produced with decision ``passed`` or ``diagnostic``; 1 receipt
produced with decision ``rejected`` or ``inconclusive`` (so CI can gate on it), or a
collection / verification / pairing failure (no receipt); 2 usage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from kiln_verify.cli import collection_options as opts
from kiln_verify.cli.help import one_of
from kiln_verify.cli.output import fail
from kiln_verify.cli.progress import CollectionProgress, run_interruptible
from kiln_verify.errors import KilnError, UsageError
from kiln_verify.openenv.collect import CollectionControls, ProgressHook
from kiln_verify.openenv.evaluate import (
    BASELINE_DIR,
    RECEIPT_NAME,
    Evaluation,
    TrainingInterval,
    check_layout,
    check_live_request,
    evaluate_bundles,
    run_evaluation,
)
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.policy.registry import POLICY_NAMES, build_policy, parse_policy_options
from kiln_verify.openenv.records.evaluation import EnvironmentEvalGate

__all__ = ["DEFAULT_OUTPUT_DIR", "evaluate_command", "register"]

DEFAULT_OUTPUT_DIR = "openenv-evaluation"
_FAILING_DECISIONS = frozenset({"rejected", "inconclusive"})


def _gate(
    min_mean_improvement: float | None, min_mean_return: float | None
) -> EnvironmentEvalGate | None:
    if min_mean_improvement is None and min_mean_return is None:
        return None
    improvement = 0.0 if min_mean_improvement is None else float(min_mean_improvement)
    if not math.isfinite(improvement) or improvement < 0:
        raise UsageError("--min-mean-improvement must be a finite number >= 0")
    if min_mean_return is not None and not math.isfinite(min_mean_return):
        raise UsageError("--min-mean-return must be a finite number")
    return EnvironmentEvalGate(
        min_mean_improvement=improvement,
        min_mean_return=None if min_mean_return is None else float(min_mean_return),
    )


def _training(seed_start: int | None, groups: int | None) -> TrainingInterval | None:
    if seed_start is None and groups is None:
        return None
    if seed_start is None or groups is None:
        raise UsageError("--training-seed-start and --training-groups go together")
    return TrainingInterval(seed_start, groups)


def _policy(flag: str, name: str | None, options: list[str] | None) -> Policy:
    if name is None:
        raise UsageError(f"{flag} is required", hint=f"{flag} {'|'.join(POLICY_NAMES)}")
    return build_policy(name, parse_policy_options(options or []))


async def _live(
    controls: CollectionControls,
    baseline: Policy,
    candidate: Policy,
    output_dir: str,
    gate: EnvironmentEvalGate | None,
    training: TrainingInterval | None,
    progress: ProgressHook,
) -> Evaluation:
    try:
        return await run_evaluation(
            controls,
            baseline,
            candidate,
            output_dir,
            gate=gate,
            training=training,
            progress=progress,
        )
    finally:
        await _close(baseline, candidate)


async def _close(*policies: Policy | None) -> None:
    for policy in policies:
        if policy is not None:
            await policy.aclose()


def _table(evaluation: Evaluation) -> Table:
    receipt = evaluation.receipt
    evidence = receipt.evidence
    table = Table(title="OpenEnv paired held-out evaluation", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = [
        ("decision", evidence.decision),
        ("outcome", receipt.outcome),
        ("paired groups / episodes", f"{evidence.paired_groups} / {evidence.paired_episodes}"),
        (
            "improved / regressed / tied",
            f"{evidence.improved_groups} / {evidence.regressed_groups} / {evidence.tied_groups}",
        ),
        ("baseline mean return", repr(evidence.baseline_mean_return)),
        ("candidate mean return", repr(evidence.candidate_mean_return)),
        ("mean return improvement", repr(evidence.mean_return_improvement)),
        ("exact sign test p", repr(evidence.exact_sign_test_p_value)),
        ("reason", evidence.reason),
        ("receipt", evaluation.receipt_path or "-"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


def _evaluate(
    flags: opts.CollectionFlags,
    seed_start: Annotated[
        int | None,
        typer.Option(
            "--seed-start",
            metavar="SEED",
            help="Held-out seed of group 0 (default: after training, else 0).",
        ),
    ] = None,
    baseline_policy: Annotated[
        str | None,
        typer.Option(
            "--baseline-policy", metavar="NAME", help=f"Baseline policy: {one_of(POLICY_NAMES)}."
        ),
    ] = None,
    baseline_policy_option: Annotated[
        list[str] | None,
        typer.Option(
            "--baseline-policy-option", metavar="KEY=VALUE", help="Baseline policy option."
        ),
    ] = None,
    candidate_policy: Annotated[
        str | None,
        typer.Option(
            "--candidate-policy",
            metavar="NAME",
            help=f"Candidate policy: {one_of(POLICY_NAMES)}.",
        ),
    ] = None,
    candidate_policy_option: Annotated[
        list[str] | None,
        typer.Option(
            "--candidate-policy-option", metavar="KEY=VALUE", help="Candidate policy option."
        ),
    ] = None,
    baseline_summary: Annotated[
        str | None,
        typer.Option(
            "--baseline-summary",
            metavar="PATH",
            help="Offline form: the baseline bundle's summary.",
        ),
    ] = None,
    candidate_summary: Annotated[
        str | None,
        typer.Option(
            "--candidate-summary",
            metavar="PATH",
            help="Offline form: the candidate bundle's summary.",
        ),
    ] = None,
    receipt: Annotated[
        str | None,
        typer.Option(
            "--receipt", metavar="PATH", help="Offline form: write the receipt to this path."
        ),
    ] = None,
    output_dir: Annotated[
        str | None,
        typer.Option(
            "--output-dir",
            metavar="DIR",
            help=f"Directory for baseline/, candidate/ and {RECEIPT_NAME} "
            f"(live default {DEFAULT_OUTPUT_DIR}).",
        ),
    ] = None,
    training_seed_start: Annotated[
        int | None,
        typer.Option(
            "--training-seed-start", metavar="SEED", help="Declared training interval: first seed."
        ),
    ] = None,
    training_groups: Annotated[
        int | None,
        typer.Option(
            "--training-groups", metavar="N", help="Declared training interval: number of groups."
        ),
    ] = None,
    min_mean_improvement: Annotated[
        float | None,
        typer.Option(
            "--min-mean-improvement",
            metavar="X",
            help="Gate: least mean-return improvement (>= 0).",
        ),
    ] = None,
    min_mean_return: Annotated[
        float | None,
        typer.Option("--min-mean-return", metavar="X", help="Gate: least candidate mean return."),
    ] = None,
    force: opts.Force = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the receipt (or the error) as JSON.")
    ] = False,
) -> None:
    """Compare a candidate with a baseline policy on paired held-out seeds (sign test)."""
    baseline: Policy | None = None
    candidate: Policy | None = None
    try:
        gate = _gate(min_mean_improvement, min_mean_return)
        training = _training(training_seed_start, training_groups)
        offline = baseline_summary is not None or candidate_summary is not None
        if offline:
            if baseline_summary is None or candidate_summary is None:
                raise UsageError("--baseline-summary and --candidate-summary go together")
            if flags.environment or baseline_policy or candidate_policy or flags.oracle:
                raise UsageError(
                    "the offline form (--baseline-summary/--candidate-summary) collects "
                    "nothing: drop --environment, --oracle and the policy flags"
                )
            if receipt is not None and output_dir is not None:
                raise UsageError("--receipt and --output-dir are mutually exclusive")
            target = receipt
            if output_dir is not None:
                Path(output_dir).mkdir(parents=True, exist_ok=True)
                target = str(Path(output_dir) / RECEIPT_NAME)
            evaluation = evaluate_bundles(
                baseline_summary,
                candidate_summary,
                gate=gate,
                training=training,
                receipt_path=target,
                force=force,
            )
        else:
            if receipt is not None:
                raise UsageError(
                    "--receipt belongs to the offline form; the live form writes "
                    f"--output-dir/{RECEIPT_NAME}"
                )
            embedded = flags.embedded()
            start = seed_start
            if start is None:
                start = training.next_seed if training is not None else 0
            options = dataclasses.replace(flags.options, seed_start=start)
            controls = dataclasses.replace(flags.controls(options), force=force)
            check_live_request(controls, gate, training)
            directory = output_dir or DEFAULT_OUTPUT_DIR
            check_layout(directory, force=force)  # before any policy loads or server is used
            baseline = _policy("--baseline-policy", baseline_policy, baseline_policy_option)
            candidate = _policy("--candidate-policy", candidate_policy, candidate_policy_option)
            with embedded.serve(controls) as live:
                pair = (baseline, candidate)
                baseline = candidate = None  # from here on _live closes them
                evaluation = _run_live(live, pair, directory, gate, training, show_bar=not as_json)
    except KilnError as exc:
        fail(exc, as_json=as_json)
    finally:
        if baseline is not None or candidate is not None:
            asyncio.run(_close(baseline, candidate))
    if as_json:
        typer.echo(evaluation.data.decode("utf-8"), nl=False)
    else:
        Console().print(_table(evaluation))
    if evaluation.receipt.evidence.decision in _FAILING_DECISIONS:
        raise typer.Exit(1)


def _run_live(
    controls: CollectionControls,
    pair: tuple[Policy, Policy],
    directory: str,
    gate: EnvironmentEvalGate | None,
    training: TrainingInterval | None,
    *,
    show_bar: bool,
) -> Evaluation:
    progress = CollectionProgress(
        "evaluate", 2 * controls.options.groups, 2 * controls.options.rollout_count
    )
    with progress.renderer(terminal=show_bar and sys.stderr.isatty()) as hook:
        return run_interruptible(
            lambda: _live(controls, *pair, directory, gate, training, hook),
            progress,
            outputs=f"{directory}/{BASELINE_DIR}",
        )


evaluate_command = opts.collection_command(
    _evaluate,
    defaults={"groups": 20, "group_size": 1},
    oracle_help="Embedded oracle to evaluate on when no --environment is given.",
)


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to the ``openenv`` command group."""
    app.command("evaluate")(evaluate_command)
