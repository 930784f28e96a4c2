"""One bundle of a run directory, verified offline, and what later links read of it.

The three files are named by the run's layout, never by the paths the summary recorded
(those are the server's, and may even exist on this machine): the summary at its layout
path, its dataset and replay passed to the offline verifier explicitly. The summary's
fields come from the verifier's own validated header (no second parse); an evaluation
side's replay, which the pairing reads, is read back once and must be the bytes the
verifier hashed. The summary is hashed once more for its size and must still be the
verified bytes, so every later check works on verified bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.errors import FileAccessError
from kiln_verify.limits import MAX_OPENENV_REPLAY_BYTES
from kiln_verify.openenv.evaluate.pairing import PairedBundle
from kiln_verify.openenv.records.replay import read_replay
from kiln_verify.openenv.records.reports import VerificationReport
from kiln_verify.openenv.records.serialize import summary_file_sha256
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.openenv.runcheck.files import RunDirectory, hash_run_file
from kiln_verify.openenv.runcheck.records import BundleCheck, RunFile
from kiln_verify.openenv.verify import verify_bundle_digests

__all__ = ["LoadedBundle", "load_side"]


@dataclass(frozen=True, slots=True)
class LoadedBundle:
    """A verified bundle: its summary, what the pairing reads (evaluation sides only), the
    report and the three identities."""

    summary: RolloutSummary
    summary_path: str
    paired: PairedBundle | None
    report: VerificationReport
    check: BundleCheck
    files: dict[str, RunFile]

    def pairing(self) -> PairedBundle:
        assert self.paired is not None, "loaded without its replay"
        return self.paired


def _kinds(side: str) -> tuple[str, str, str]:
    if side == "run":
        return ("dataset", "replay", "summary")
    prefix = f"environment_eval_{side}_"
    return (prefix + "dataset", prefix + "replay", prefix + "summary")


def load_side(directory: RunDirectory, side: str) -> LoadedBundle:
    """Verify the ``run``, ``baseline`` or ``candidate`` bundle and read it back (the
    replay only for an evaluation side: the pairing reads it, nothing else does)."""
    dataset_kind, replay_kind, summary_kind = _kinds(side)
    relative = {kind: ARTIFACT_PATHS[kind] for kind in _kinds(side)}
    summary_path = directory.path(summary_kind)
    verified = verify_bundle_digests(
        summary_path,
        dataset_path=directory.path(dataset_kind),
        replay_path=directory.path(replay_kind),
    )
    report = verified.report
    summary = verified.header  # validated by the verifier: not parsed again
    summary_sha = verified.summary_sha256
    paired: PairedBundle | None = None
    if side != "run":
        replay_data = directory.read(
            replay_kind, MAX_OPENENV_REPLAY_BYTES, "MAX_OPENENV_REPLAY_BYTES"
        )
        if str(summary_file_sha256(replay_data)) != report.replay_sha256:
            raise FileAccessError(
                "the replay changed while the run was verified", path=report.replay_path
            )
        replay = read_replay(replay_data, report.replay_path)
        paired = PairedBundle(summary, replay, summary_sha, summary_path)
    files = {
        dataset_kind: RunFile(
            kind=dataset_kind,
            relative_path=relative[dataset_kind],
            sha256=summary.dataset_sha256,
            bytes=summary.dataset_bytes,
        ),
        replay_kind: RunFile(
            kind=replay_kind,
            relative_path=relative[replay_kind],
            sha256=summary.replay_sha256,
            bytes=summary.replay_bytes,
        ),
        summary_kind: hash_run_file(directory.root, summary_kind),
    }
    if files[summary_kind].sha256 != summary_sha:
        raise FileAccessError("the summary changed while the run was verified", path=summary_path)
    check = BundleCheck(
        name=side,  # type: ignore[arg-type]
        summary_path=relative[summary_kind],
        summary_sha256=summary_sha,
        dataset_sha256=report.dataset_sha256,
        replay_sha256=report.replay_sha256,
        groups=report.groups,
        rollouts=report.rollouts,
    )
    return LoadedBundle(summary, summary_path, paired, report, check, files)
