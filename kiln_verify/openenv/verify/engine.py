"""Offline verification of a rollout bundle (kiln-openenv-contract §6), start to finish.

Order: summary (version rules) → paths → replay bytes (size, digest) → replay parsed and
checked on its own → summary ↔ replay cross-checks, reset plan, group plan → the corpus,
streamed once: hashed while each line is parsed and checked against its replay group and
summary records → corpus size, digest, line count → statistics.

Memory: the summary and the replay are parsed whole (each capped at 256 MiB by contract);
the corpus is never held — one line at a time. If a corpus line fails a check, the rest
of the file is still hashed, and a digest mismatch is reported in preference (the file was
altered after publication).
"""

from __future__ import annotations

import os
from pathlib import Path

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import (
    BundleDatasetDigestMismatch,
    BundleHeaderMismatch,
    BundleReplayDigestMismatch,
    KilnError,
    LimitExceeded,
)
from kiln_verify.limits import (
    MAX_OPENENV_DATASET_BYTES,
    MAX_OPENENV_REPLAY_BYTES,
    MAX_OPENENV_SUMMARY_BYTES,
)
from kiln_verify.openenv.records.common import BehaviorPolicyIdentity
from kiln_verify.openenv.records.replay import ReplayManifest, read_replay
from kiln_verify.openenv.records.reports import VerificationReport
from kiln_verify.openenv.records.rollout import iter_rollout_lines
from kiln_verify.openenv.records.serialize import action_schema_sha256, reset_sha256
from kiln_verify.openenv.records.summary import RolloutSummary, read_summary
from kiln_verify.openenv.verify.candidates import CandidateContext, check_candidate
from kiln_verify.openenv.verify.cross import (
    check_group_plan,
    check_header,
    check_messages,
    check_reset_plan,
)
from kiln_verify.openenv.verify.files import HashingReader, read_bounded, resolve_bundle_path
from kiln_verify.openenv.verify.replay_checks import check_replay, where
from kiln_verify.openenv.verify.stats import check_stats

__all__ = ["verify_bundle"]


def _check_replay_bytes(data: bytes, summary: RolloutSummary, shown: str) -> None:
    if len(data) != summary.replay_bytes:
        raise BundleReplayDigestMismatch(
            f"replay file has {len(data)} bytes, the summary says {summary.replay_bytes} (§6.3)",
            path=shown,
        )
    if str(sha256_bytes(data)) != summary.replay_sha256:
        raise BundleReplayDigestMismatch(
            "replay file SHA-256 differs from the summary's replay_sha256 (§6.3)", path=shown
        )


class _CorpusPass:
    """The streamed corpus checks (§6.4, §6.8 messages, §6.9)."""

    def __init__(
        self,
        summary: RolloutSummary,
        replay: ReplayManifest,
        *,
        dataset_shown: str,
        summary_shown: str,
    ) -> None:
        self.summary = summary
        self.replay = replay
        self.dataset_shown = dataset_shown
        self.summary_shown = summary_shown
        self.action_digests = [
            str(action_schema_sha256(inspection.schema_.action))
            for inspection in replay.environments
        ]
        self.v5 = summary.version == 5
        self.corpus_policy: BehaviorPolicyIdentity | None = summary.behavior_policy
        self.lines = 0

    def run(self, reader: HashingReader) -> None:
        size = self.summary.group_size
        stream = reader  # duck-typed binary stream: readline/read
        for number, _raw, line in iter_rollout_lines(
            stream,  # type: ignore[arg-type]
            self.dataset_shown,
        ):
            self.lines = number
            g = number - 1
            if g >= len(self.replay.groups):
                raise BundleHeaderMismatch(
                    f"the corpus has more lines than the {len(self.replay.groups)} groups (§6.6)",
                    path=self.dataset_shown,
                    line=number,
                    location=where(g),
                )
            group = self.replay.groups[g]
            inspection = self.replay.environments[group.environment_index]
            check_messages(
                line, group, inspection, dataset_shown=self.dataset_shown, line_number=number
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
                reset_sha256=str(reset_sha256(group.reset_payload)),
                behavior_policy=self.corpus_policy,
                check_behavior_policy=True,
                dataset_shown=self.dataset_shown,
                summary_shown=self.summary_shown,
                line=number,
            )
            for candidate, completion in zip(group.candidates, line.completions, strict=True):
                record = self.summary.rollouts[g * size + candidate.candidate_index]
                check_candidate(completion, candidate, record, ctx)


def _stream_corpus(path: Path, summary: RolloutSummary, corpus: _CorpusPass, shown: str) -> None:
    with open_regular(path) as fd:
        size = os.fstat(fd).st_size
        if size > MAX_OPENENV_DATASET_BYTES:
            raise LimitExceeded(
                "file",
                limit="MAX_OPENENV_DATASET_BYTES",
                bound=MAX_OPENENV_DATASET_BYTES,
                observed=size,
                path=shown,
            )
        if size != summary.dataset_bytes:
            raise BundleDatasetDigestMismatch(
                f"corpus has {size} bytes, the summary says {summary.dataset_bytes} (§6.3)",
                path=shown,
            )
        with open(fd, "rb", closefd=False) as stream:
            reader = HashingReader(
                stream, max_bytes=summary.dataset_bytes, limit="dataset_bytes", shown=shown
            )
            try:
                corpus.run(reader)
            except KilnError as failure:
                try:
                    reader.drain()
                except KilnError:
                    raise failure from None
                if str(reader.sha256) != summary.dataset_sha256:
                    raise BundleDatasetDigestMismatch(
                        "corpus SHA-256 differs from the summary's dataset_sha256 (§6.3)",
                        path=shown,
                    ) from failure
                raise
    if reader.size != summary.dataset_bytes or str(reader.sha256) != summary.dataset_sha256:
        raise BundleDatasetDigestMismatch(
            "corpus SHA-256 differs from the summary's dataset_sha256 (§6.3)", path=shown
        )


def verify_bundle(
    summary_path: str | os.PathLike[str],
    *,
    dataset_path: str | os.PathLike[str] | None = None,
    replay_path: str | os.PathLike[str] | None = None,
) -> VerificationReport:
    """Verify a bundle offline; return the report or raise a typed :class:`KilnError`.

    Bundle rule failures are ``bundle_*`` errors naming the file and group / candidate /
    step; malformed files keep the records package's codes (``json_*``, ``record_invalid``,
    ``summary_version_*``, ``record_schema_unsupported``); unreadable files the path codes.
    """
    summary_file = Path(summary_path)
    summary_shown = os.fspath(summary_file)
    summary_data = read_bounded(
        summary_file, max_bytes=MAX_OPENENV_SUMMARY_BYTES, limit="MAX_OPENENV_SUMMARY_BYTES"
    )
    summary = read_summary(summary_data, summary_shown)
    del summary_data
    dataset_file = resolve_bundle_path(dataset_path, summary.output_path, summary_file)
    replay_file = resolve_bundle_path(replay_path, summary.replay_output_path, summary_file)
    dataset_shown, replay_shown = os.fspath(dataset_file), os.fspath(replay_file)

    replay_data = read_bounded(
        replay_file, max_bytes=MAX_OPENENV_REPLAY_BYTES, limit="MAX_OPENENV_REPLAY_BYTES"
    )
    _check_replay_bytes(replay_data, summary, replay_shown)
    replay = read_replay(replay_data, replay_shown)
    del replay_data
    exchanges = check_replay(
        replay, max_recoverable=summary.max_recoverable_errors, shown=replay_shown
    )
    check_header(summary, replay, replay_shown=replay_shown)
    check_reset_plan(summary, replay, replay_shown=replay_shown)
    check_group_plan(summary, replay, replay_shown=replay_shown)

    corpus = _CorpusPass(summary, replay, dataset_shown=dataset_shown, summary_shown=summary_shown)
    _stream_corpus(dataset_file, summary, corpus, dataset_shown)
    if corpus.lines != len(replay.groups):
        raise BundleHeaderMismatch(
            f"the corpus has {corpus.lines} lines, the replay {len(replay.groups)} groups (§6.6)",
            path=dataset_shown,
        )
    check_stats(summary.stats, summary.rollouts, shown=summary_shown)
    return VerificationReport(
        schema="kiln.openenv-verification.v1",
        summary_path=summary_shown,
        dataset_path=dataset_shown,
        replay_path=replay_shown,
        dataset_sha256=summary.dataset_sha256,
        replay_sha256=summary.replay_sha256,
        groups=len(replay.groups),
        rollouts=len(summary.rollouts),
        environment_exchanges=exchanges,
    )
