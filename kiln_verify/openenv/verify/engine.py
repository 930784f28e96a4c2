"""Offline verification of a rollout bundle (kiln-openenv-contract §6), start to finish.

Order: summary pass 1 (strict parse and validation of the whole receipt, version rules,
record count, statistics recomputed, bytes hashed) → paths → replay size → replay header
and summary ↔ replay header checks → one lock-step pass over the replay groups, the corpus
lines and the summary's rollout records (all three in group / candidate order): for each
group its §6.5 checks, group plan and reset template, then its corpus line (§6.8
messages, §6.9 candidates against their summary records) → group counts, reset plan,
replay digest, corpus size / digest / line count → statistics.

Memory: every file is streamed (:mod:`kiln_verify.openenv.verify.streams`, the corpus one
line at a time); what is kept is O(1) per group plus the per-environment data. If a check
fails, the rest of the replay and then of the corpus is still hashed, and a digest
mismatch is reported in preference (the file was altered after publication): the replay's
first, then — for a failure found in the corpus or the summary records — the corpus's.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.core.paths import open_regular
from kiln_verify.errors import (
    BundleDatasetDigestMismatch,
    BundleHeaderMismatch,
    FileAccessError,
    KilnError,
    LimitExceeded,
)
from kiln_verify.limits import HASH_CHUNK_BYTES, MAX_OPENENV_DATASET_BYTES
from kiln_verify.openenv.records.prompt import system_prompt
from kiln_verify.openenv.records.replay import ReplayGroup, ReplayManifest
from kiln_verify.openenv.records.reports import VerificationReport
from kiln_verify.openenv.records.rollout import AgenticGroup, iter_rollout_lines
from kiln_verify.openenv.records.serialize import action_schema_sha256, reset_sha256
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.openenv.verify.candidates import CandidateContext, check_candidate
from kiln_verify.openenv.verify.cross import (
    ResetPlan,
    check_counts,
    check_group_plan_one,
    check_messages,
    check_replay_header,
)
from kiln_verify.openenv.verify.files import HashingReader, resolve_bundle_path
from kiln_verify.openenv.verify.observer import CandidateObserver, VerifiedCandidate
from kiln_verify.openenv.verify.replay_checks import check_group, where
from kiln_verify.openenv.verify.stats import check_stats
from kiln_verify.openenv.verify.streams import ReplayStream, SummaryScan, scan_summary
from kiln_verify.openenv.verify.summary_pass import SummaryRecords
from kiln_verify.openenv.verify.tails import TailRules
from kiln_verify.records import BehaviorPolicyIdentity

__all__ = ["VerifiedBundle", "verify_bundle", "verify_bundle_digests"]


class _Lockstep:
    """The streamed pass over replay groups, corpus lines and summary records."""

    def __init__(
        self,
        scan: SummaryScan,
        replay: ReplayStream,
        manifest: ReplayManifest,
        *,
        dataset_shown: str,
        summary_shown: str,
        observer: CandidateObserver | None = None,
    ) -> None:
        self.observer = observer
        self.summary = scan.summary
        self.scan = scan
        self.replay = replay
        self.manifest = manifest
        self.dataset_shown = dataset_shown
        self.summary_shown = summary_shown
        self.action_digests = [
            str(action_schema_sha256(inspection.schema_.action))
            for inspection in manifest.environments
        ]
        self.system_prompts: dict[int, str] = {}  # per environment, computed on first use
        self.tail_rules: dict[int, TailRules] = {}  # likewise
        self.v5 = self.summary.version == 5
        self.corpus_policy: BehaviorPolicyIdentity | None = self.summary.behavior_policy
        self.lines = 0
        self.exchanges = 0
        self.groups = 0
        self.in_replay = True
        plan = self.summary.reset_plan_sha256
        self.reset_plan = (
            ResetPlan(len(manifest.environments), replay_shown=replay.shown)
            if plan is not None
            else None
        )
        self.records: SummaryRecords | None = None

    def close(self) -> None:
        if self.records is not None:
            self.records.close()

    def replay_group(self, group: ReplayGroup) -> None:
        summary, manifest, shown = self.summary, self.manifest, self.replay.shown
        position = self.groups
        if position >= summary.groups:
            check_counts(summary, groups=position + 1, rollouts=self.scan.count, replay_shown=shown)
        self.exchanges += check_group(
            group,
            position,
            environments=len(manifest.environments),
            max_steps=manifest.max_steps,
            penalty=manifest.protocol_error_reward,
            max_recoverable=summary.max_recoverable_errors,
            shown=shown,
        )
        self.groups += 1
        check_group_plan_one(summary, group, len(manifest.environments), replay_shown=shown)
        if self.reset_plan is not None:
            self.reset_plan.add(group)

    def run(self, first: ReplayGroup, reader: HashingReader) -> None:
        """From the first group (its replay checks already done) to the end of all files."""
        lines = iter_rollout_lines(reader, self.dataset_shown)  # type: ignore[arg-type]
        records = self.records = self.scan.records()
        group: ReplayGroup | None = first
        corpus_done = False
        while group is not None:
            if group is not first:
                self.in_replay = True
                self.replay_group(group)
            self.in_replay = False
            if not corpus_done:
                item = next(lines, None)
                if item is None:
                    corpus_done = True
                else:
                    self.lines = item.number
                    self.corpus_line(item.number, item.group, group, records)
            self.in_replay = True
            group = self.replay.next_group()
        summary, shown = self.summary, self.replay.shown
        check_counts(summary, groups=self.groups, rollouts=self.scan.count, replay_shown=shown)
        if self.reset_plan is not None and summary.reset_plan_sha256 is not None:
            self.reset_plan.check(summary.reset_plan_sha256)
        self.replay.finish()
        self.in_replay = False
        if not corpus_done:
            extra = next(lines, None)
            if extra is not None:
                raise BundleHeaderMismatch(
                    f"the corpus has more lines than the {self.groups} groups (§6.6)",
                    path=self.dataset_shown,
                    line=extra.number,
                    location=where(self.groups),
                )
        for _ in records:  # pass 2 to the end: its digest proves the summary did not change
            pass

    def _tail_rules(self, index: int) -> TailRules:
        rules = self.tail_rules.get(index)
        if rules is None:
            action = self.manifest.environments[index].schema_.action
            rules = self.tail_rules[index] = TailRules(action)
        return rules

    def _system_prompt(self, index: int) -> str:
        text = self.system_prompts.get(index)
        if text is None:
            text = self.system_prompts[index] = system_prompt(self.manifest.environments[index])
        return text

    def corpus_line(
        self, number: int, line: AgenticGroup, group: ReplayGroup, records: SummaryRecords
    ) -> None:
        g = number - 1
        inspection = self.manifest.environments[group.environment_index]
        check_messages(
            line,
            group,
            inspection,
            dataset_shown=self.dataset_shown,
            line_number=number,
            system=self._system_prompt(group.environment_index),
        )
        if len(line.completions) != len(group.candidates):
            raise BundleHeaderMismatch(
                f"{len(line.completions)} completions, the replay group has "
                f"{len(group.candidates)} candidates (§6.8)",
                path=self.dataset_shown,
                line=number,
                location=where(g),
            )
        if not self.v5 and self.corpus_policy is None:
            self.corpus_policy = line.completions[0].openenv.behavior_policy
        ctx = CandidateContext(
            group=g,
            seed=group.seed,
            inspection=inspection,
            action_schema_sha256=self.action_digests[group.environment_index],
            reset_sha256=str(reset_sha256(group.reset_payload, parsed=True)),
            behavior_policy=self.corpus_policy,
            check_behavior_policy=True,
            dataset_shown=self.dataset_shown,
            summary_shown=self.summary_shown,
            line=number,
            thinking=self.summary.thinking,
            tail_rules=self._tail_rules(group.environment_index),
        )
        for candidate, completion in zip(group.candidates, line.completions, strict=True):
            record = next(records, None)  # group-major, candidate order (counts checked)
            if record is None:
                raise FileAccessError(
                    "the summary changed while it was being read", path=self.summary_shown
                )
            harness = check_candidate(completion, candidate, record, ctx)
            if self.observer is not None:
                self.observer.candidate(
                    VerifiedCandidate(group.environment_index, record, completion, harness)
                )


def _open_corpus(
    path: Path, expected: int, shown: str, stack: contextlib.ExitStack
) -> HashingReader:
    fd = stack.enter_context(open_regular(path))
    size = os.fstat(fd).st_size
    if size > MAX_OPENENV_DATASET_BYTES:
        raise LimitExceeded(
            "file",
            limit="MAX_OPENENV_DATASET_BYTES",
            bound=MAX_OPENENV_DATASET_BYTES,
            observed=size,
            path=shown,
        )
    if size != expected:
        raise BundleDatasetDigestMismatch(
            f"corpus has {size} bytes, the summary says {expected} (§6.3)", path=shown
        )
    # one read per MiB rather than per 8 KiB: corpus lines are tens of KiB
    stream = stack.enter_context(open(fd, "rb", buffering=HASH_CHUNK_BYTES, closefd=False))  # noqa: SIM115 - the stack closes it
    return HashingReader(stream, max_bytes=expected, limit="dataset_bytes", shown=shown)


@dataclass(frozen=True, slots=True)
class VerifiedBundle:
    """The report and the SHA-256 of the summary bytes it verified: a caller that reads
    the summary again (evaluation) proves with it that it read the verified bytes."""

    report: VerificationReport
    summary_sha256: str
    header: RolloutSummary
    """The summary as pass 1 validated it, its ``rollouts`` cut to the first record: every
    other field, for a caller that needs the verified summary without reading it again."""


def verify_bundle(
    summary_path: str | os.PathLike[str],
    *,
    dataset_path: str | os.PathLike[str] | None = None,
    replay_path: str | os.PathLike[str] | None = None,
    observer: CandidateObserver | None = None,
) -> VerificationReport:
    """Verify a bundle offline; return the report or raise a typed :class:`KilnError`
    (:func:`verify_bundle_digests` tells which summary bytes it verified)."""
    return verify_bundle_digests(
        summary_path, dataset_path=dataset_path, replay_path=replay_path, observer=observer
    ).report


def verify_bundle_digests(
    summary_path: str | os.PathLike[str],
    *,
    dataset_path: str | os.PathLike[str] | None = None,
    replay_path: str | os.PathLike[str] | None = None,
    observer: CandidateObserver | None = None,
) -> VerifiedBundle:
    """:func:`verify_bundle` with the digest of the summary bytes it verified.

    ``observer`` is shown each candidate once it passed its checks
    (:mod:`kiln_verify.openenv.verify.observer`); the bundle is accepted only if this
    function returns.

    Bundle rule failures are ``bundle_*`` errors naming the file and group / candidate /
    step; malformed files keep the records package's codes (``json_*``, ``record_invalid``,
    ``summary_version_*``, ``record_schema_unsupported``); unreadable files the path codes.
    """
    summary_file = Path(summary_path)
    summary_shown = os.fspath(summary_file.absolute())
    scan = scan_summary(summary_file)
    summary = scan.summary
    if observer is not None:
        observer.start(summary)
    dataset_file = resolve_bundle_path(dataset_path, summary.output_path, summary_file)
    replay_file = resolve_bundle_path(replay_path, summary.replay_output_path, summary_file)
    dataset_shown, replay_shown = os.fspath(dataset_file), os.fspath(replay_file)

    with contextlib.ExitStack() as stack:
        replay = ReplayStream(
            replay_file,
            expected_bytes=summary.replay_bytes,
            expected_sha256=summary.replay_sha256,
        )
        stack.callback(replay.close)
        replay.check_size(replay.size)
        corpus: HashingReader | None = None
        lockstep: _Lockstep | None = None
        try:
            manifest, first = replay.header()
            if first is None:  # pragma: no cover - the manifest needs at least one group
                raise BundleHeaderMismatch("the replay has no groups (§6.6)", path=replay_shown)
            check_replay_header(summary, manifest, replay_shown=replay_shown)
            check_counts(summary, groups=None, rollouts=scan.count, replay_shown=replay_shown)
            lockstep = _Lockstep(
                scan,
                replay,
                manifest,
                dataset_shown=dataset_shown,
                summary_shown=summary_shown,
                observer=observer,
            )
            lockstep.replay_group(first)
            lockstep.in_replay = False
            corpus = _open_corpus(dataset_file, summary.dataset_bytes, dataset_shown, stack)
            lockstep.in_replay = True
            stack.callback(lockstep.close)
            lockstep.run(first, corpus)
        except KilnError as failure:
            preferred = replay.drain_digest_failure()
            if preferred is None and lockstep is not None and lockstep.records is not None:
                preferred = lockstep.records.changed()  # pass 2 read other bytes than pass 1
            if preferred is not None:
                raise preferred from failure
            if lockstep is None or lockstep.in_replay or corpus is None:
                raise
            try:
                corpus.drain()
            except KilnError:
                raise failure from None
            if str(corpus.sha256) != summary.dataset_sha256:
                raise BundleDatasetDigestMismatch(
                    "corpus SHA-256 differs from the summary's dataset_sha256 (§6.3)",
                    path=dataset_shown,
                ) from failure
            raise
    assert corpus is not None
    assert lockstep is not None
    if corpus.size != summary.dataset_bytes or str(corpus.sha256) != summary.dataset_sha256:
        raise BundleDatasetDigestMismatch(
            "corpus SHA-256 differs from the summary's dataset_sha256 (§6.3)", path=dataset_shown
        )
    if lockstep.lines != lockstep.groups:
        raise BundleHeaderMismatch(
            f"the corpus has {lockstep.lines} lines, the replay {lockstep.groups} groups (§6.6)",
            path=dataset_shown,
        )
    if scan.stats is not None:
        check_stats(summary.stats, scan.stats, shown=summary_shown)
    report = VerificationReport(
        schema="kiln.openenv-verification.v1",
        summary_path=summary_shown,
        dataset_path=dataset_shown,
        replay_path=replay_shown,
        dataset_sha256=summary.dataset_sha256,
        replay_sha256=summary.replay_sha256,
        groups=lockstep.groups,
        rollouts=scan.count,
        environment_exchanges=lockstep.exchanges,
    )
    return VerifiedBundle(report, scan.sha256, summary)
