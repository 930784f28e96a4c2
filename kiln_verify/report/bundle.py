"""The bundle report: what a verified rollout bundle holds, per environment and per group.

Built only from :class:`~kiln_verify.report.bundle_facts.BundleFacts`, i.e. from a bundle
offline verification accepted, with the contract's statistics. It answers the questions
a JSON receipt hides: each environment's return distribution and terminations (which
environment produced the invalid actions), how much reward variance each GRPO group has
(a group whose candidates all scored the same trains nothing; more than half such groups
is a warning), and which harness and protocol error codes ended episodes.
"""

from __future__ import annotations

from collections import Counter

from kiln_verify.limits import (
    REPORT_EXAMPLE_SEGMENTS,
    REPORT_EXCERPT_CHARS,
    REPORT_HISTOGRAM_BINS,
    REPORT_TOP_ERROR_CODES,
    REPORT_ZERO_VARIANCE_WARN_FRACTION,
)
from kiln_verify.openenv.records.summary import RolloutStats
from kiln_verify.report.bundle_facts import BundleFacts, EnvironmentFacts, GroupFacts
from kiln_verify.report.charts import histogram
from kiln_verify.report.document import (
    Bar,
    Block,
    Cell,
    Chart,
    Details,
    Document,
    KeyValues,
    Metric,
    Notice,
    Paragraph,
    Preformatted,
    Section,
    Table,
    excerpt,
    fmt,
    percent,
)

__all__ = ["bundle_document"]

_TERMINATIONS = (
    ("done", "done_count"),
    ("max_steps", "max_steps_count"),
    ("invalid_model_action", "invalid_model_action_count"),
    ("protocol_error", "protocol_error_count"),
)


def _env_name(facts: BundleFacts, index: int) -> str:
    return facts.summary.environments[index].identity.metadata.name


def _return_cells(stats: RolloutStats, rollouts: int) -> tuple[Cell, ...]:
    invalid = stats.invalid_model_action_count
    errors = stats.protocol_error_count
    return (
        Cell.num(rollouts),
        Cell.num(stats.mean_episode_return),
        Cell.num(stats.min_episode_return),
        Cell.num(stats.max_episode_return),
        Cell.num(stats.done_count),
        Cell.num(stats.max_steps_count),
        Cell.num(invalid, "bad" if invalid else "plain"),
        Cell.num(errors, "bad" if errors else "plain"),
    )


def _effort_cells(stats: RolloutStats) -> tuple[Cell, ...]:
    return (
        Cell.num(stats.recoverable_protocol_error_count),
        Cell.num(stats.capacity_retry_count),
        Cell.num(stats.total_environment_steps),
        Cell.num(stats.total_model_tokens),
        Cell.num(stats.mean_model_latency_ms),
    )


def _environments(facts: BundleFacts) -> Section:
    groups = Counter(group.environment_index for group in facts.groups)
    returns, effort = [], []
    for env in facts.environments:
        label = (Cell(str(env.index)), Cell(_env_name(facts, env.index)))
        stats = env.stats()
        returns.append(
            (*label, Cell.num(groups[env.index]), *_return_cells(stats, env.accumulator.count))
        )
        effort.append((*label, *_effort_cells(stats)))
    total = facts.summary.stats
    all_label = (Cell("all"), Cell("verified summary stats"))
    terminations = Chart(
        "Terminations, all environments",
        "termination",
        "episodes",
        tuple(
            Bar(
                name,
                float(getattr(total, field)),
                "bad" if name in ("invalid_model_action", "protocol_error") else "plain",
            )
            for name, field in _TERMINATIONS
        ),
    )
    return Section(
        "Environments",
        (
            Table(
                "Returns and terminations per environment",
                (
                    "#",
                    "environment",
                    "groups",
                    "rollouts",
                    "mean return",
                    "min return",
                    "max return",
                    "done",
                    "max_steps",
                    "invalid_model_action",
                    "protocol_error",
                ),
                tuple(returns),
                footer=(
                    *all_label,
                    Cell.num(len(facts.groups)),
                    *_return_cells(total, facts.verification.rollouts),
                ),
            ),
            Table(
                "Errors, retries and effort per environment",
                (
                    "#",
                    "environment",
                    "recoverable protocol errors",
                    "capacity retries",
                    "steps",
                    "model tokens",
                    "mean model latency (ms)",
                ),
                tuple(effort),
                footer=(*all_label, *_effort_cells(total)),
            ),
            terminations,
        ),
        "environments",
    )


def _identity(facts: BundleFacts, index: int) -> KeyValues:
    identity = facts.summary.environments[index].identity
    meta = identity.metadata
    items: list[tuple[str, Cell]] = [
        ("name", Cell(meta.name)),
        ("description", Cell(excerpt(meta.description, REPORT_EXCERPT_CHARS) or "\u2013")),
        ("version", Cell(meta.version or "\u2013")),
        ("author", Cell(meta.author or "\u2013")),
        ("base URL", Cell(identity.base_url)),
        ("environments served", Cell(", ".join(identity.environments) or "\u2013")),
        ("schema digest", Cell(identity.schema_sha256)),
    ]
    return KeyValues("Identity (as the environment described itself)", tuple(items))


def _example(env: EnvironmentFacts) -> Details | None:
    rollout = env.example
    if rollout is None:
        return None
    segments = rollout.trajectory
    shown = segments[:REPORT_EXAMPLE_SEGMENTS]
    blocks: list[Block] = [
        Paragraph(
            f"Group {env.example_group}, candidate {env.example_candidate}: return "
            f"{fmt(rollout.reward)}, termination {rollout.openenv.termination}, "
            f"{len(segments)} trajectory segments."
        )
    ]
    blocks.extend(
        Preformatted(
            f"{segment.role} ({segment.kind})", excerpt(segment.content, REPORT_EXCERPT_CHARS)
        )
        for segment in shown
    )
    if len(segments) > len(shown):
        blocks.append(Paragraph(f"{len(segments) - len(shown)} more segments not shown.", "muted"))
    return Details("Example episode (the environment's first rollout)", tuple(blocks), open=False)


def _environment_detail(facts: BundleFacts, env: EnvironmentFacts) -> Section:
    name = _env_name(facts, env.index)
    bins = histogram(env.returns, REPORT_HISTOGRAM_BINS)
    chart = Chart(
        f"Episode returns, environment {env.index}",
        "return",
        "episodes",
        tuple(Bar(f"{fmt(low)} to {fmt(high)}", float(count)) for low, high, count in bins),
    )
    blocks: list[Block] = [_identity(facts, env.index), chart]
    blocks.extend(_error_tables(env))
    example = _example(env)
    if example is not None:
        blocks.append(example)
    return Section(f"Environment {env.index}: {name}", tuple(blocks), f"environment-{env.index}")


def _error_tables(env: EnvironmentFacts) -> list[Block]:
    blocks: list[Block] = []
    if env.harness_codes:
        rows = tuple(
            (
                Cell(code),
                Cell.num(count, "bad"),
                Cell(excerpt(env.harness_examples[code], REPORT_EXCERPT_CHARS)),
            )
            for code, count in _top(env.harness_codes)
        )
        blocks.append(
            Table(
                "Harness error codes (invalid model actions)",
                ("code", "episodes", "first message"),
                rows,
            )
        )
    if env.protocol_codes:
        pairs = tuple(
            (Cell(code), Cell.num(count, "bad")) for code, count in _top(env.protocol_codes)
        )
        blocks.append(
            Table("Protocol error codes that ended episodes", ("code", "episodes"), pairs)
        )
    return blocks


def _top(counter: Counter[str]) -> list[tuple[str, int]]:
    """Most frequent first, ties by code (``Counter.most_common`` keeps insertion order)."""
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:REPORT_TOP_ERROR_CODES]


def _spread_section(facts: BundleFacts) -> Section:
    groups = facts.groups
    flat = [group for group in groups if group.zero_variance]
    share = len(flat) / len(groups) if groups else 0.0
    blocks: list[Block] = []
    text = (
        f"{len(flat)} of {len(groups)} groups ({percent(len(flat), len(groups))}) have zero reward "
        "variance: every candidate scored the same, so GRPO's group-relative advantage is zero "
        "and the group trains nothing."
    )
    if share > REPORT_ZERO_VARIANCE_WARN_FRACTION:
        blocks.append(Notice(f"Most groups have no reward variance. {text}", "bad"))
    else:
        blocks.append(Paragraph(text))
    varied = [group.spread for group in groups if not group.zero_variance]
    bars = [Bar("0 (no variance)", float(len(flat)), "warn")]
    bars.extend(
        Bar(f"{fmt(low)} to {fmt(high)}", float(count))
        for low, high, count in histogram(varied, REPORT_HISTOGRAM_BINS)
    )
    blocks.append(
        Chart("Groups by reward spread (max - min return)", "spread", "groups", tuple(bars))
    )
    blocks.append(_group_table(facts, groups))
    return Section("Group reward spread", tuple(blocks), "groups")


def _group_table(facts: BundleFacts, groups: tuple[GroupFacts, ...]) -> Table:
    rows = tuple(
        (
            Cell.num(group.group_index),
            Cell(_env_name(facts, group.environment_index)),
            Cell.num(group.seed),
            Cell.num(group.candidates),
            Cell.num(group.stats.mean_episode_return),
            Cell.num(group.stats.min_episode_return),
            Cell.num(group.stats.max_episode_return),
            Cell.num(group.spread),
            Cell("no variance", "warn") if group.zero_variance else Cell(""),
        )
        for group in groups
    )
    columns = (
        "group",
        "environment",
        "seed",
        "candidates",
        "mean return",
        "min return",
        "max return",
        "spread",
        "flag",
    )
    return Table("Every group", columns, rows)


def _codes_section(facts: BundleFacts) -> Section:
    harness: Counter[str] = Counter()
    protocol: Counter[str] = Counter()
    for env in facts.environments:
        harness.update(env.harness_codes)
        protocol.update(env.protocol_codes)
    blocks: list[Block] = []
    for title, counter in (
        ("Harness error codes", harness),
        ("Protocol error codes (terminal)", protocol),
    ):
        if counter:
            rows = tuple((Cell(code), Cell.num(count, "bad")) for code, count in _top(counter))
            blocks.append(
                Table(f"{title}, all environments, most common first", ("code", "episodes"), rows)
            )
    if not blocks:
        blocks.append(Paragraph("No episode ended in a harness or protocol error.", "good"))
    return Section("Most common error codes", tuple(blocks), "errors")


def _collection(facts: BundleFacts) -> KeyValues:
    summary, report = facts.summary, facts.verification
    policy = summary.behavior_policy
    items: list[tuple[str, Cell]] = [
        ("summary file", Cell(facts.summary_name)),
        ("summary schema", Cell(summary.schema_)),
        ("adapter label", Cell(summary.adapter_label)),
        ("served model", Cell(policy.served_model_id if policy is not None else "\u2013")),
        ("groups x group size", Cell(f"{summary.groups} x {summary.group_size}")),
        ("seed start", Cell.num(summary.seed_start)),
        ("max steps", Cell.num(summary.max_steps)),
        ("temperature", Cell.num(summary.temperature)),
        ("protocol error reward", Cell.num(summary.protocol_error_reward)),
        ("environment exchanges", Cell.num(report.environment_exchanges)),
        ("dataset", Cell(report.dataset_sha256)),
        ("replay", Cell(report.replay_sha256)),
    ]
    return KeyValues("Collection (from the verified receipt)", tuple(items))


def bundle_document(facts: BundleFacts) -> Document:
    """The bundle report's document (pure: same facts, same document)."""
    stats, report = facts.summary.stats, facts.verification
    flat = sum(1 for group in facts.groups if group.zero_variance)
    share_bad = bool(facts.groups) and flat / len(facts.groups) > REPORT_ZERO_VARIANCE_WARN_FRACTION
    metrics = (
        Metric("environments", str(len(facts.summary.environments))),
        Metric("groups", fmt(report.groups)),
        Metric("rollouts", fmt(report.rollouts)),
        Metric("mean return", fmt(stats.mean_episode_return)),
        Metric(
            "zero-variance groups", f"{flat} of {report.groups}", "bad" if share_bad else "plain"
        ),
        Metric(
            "invalid actions",
            fmt(stats.invalid_model_action_count),
            "bad" if stats.invalid_model_action_count else "good",
        ),
        Metric(
            "protocol errors",
            fmt(stats.protocol_error_count),
            "bad" if stats.protocol_error_count else "good",
        ),
    )
    verified = Notice(
        f"Offline verification accepted this bundle: {report.groups} groups, {report.rollouts} "
        f"rollouts, {report.environment_exchanges} environment exchanges. Every figure below "
        "is computed with the contract's statistics rule from the records it verified.",
        "good",
    )
    sections = [
        Section("Verification", (verified, _collection(facts)), "verification"),
        _environments(facts),
        _spread_section(facts),
        _codes_section(facts),
    ]
    sections.extend(_environment_detail(facts, env) for env in facts.environments)
    return Document(
        kind="bundle",
        title="Rollout bundle report",
        subtitle=f"{facts.summary_name} \u00b7 dataset {report.dataset_sha256}",
        metrics=metrics,
        sections=tuple(sections),
    )
