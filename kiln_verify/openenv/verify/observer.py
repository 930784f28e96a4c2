"""What a caller may watch while :func:`~kiln_verify.openenv.verify.verify_bundle` runs.

A report about a bundle must describe exactly what offline verification accepted, and
must not read, parse or validate the bundle a second time (its statistics are the
verifier's, never a second computation; docs/reports.md). So the verifier hands an
optional observer the receipt it validated, then each candidate once that candidate's
§6.9 checks have passed, in record order, with what it has already parsed: the summary
record, the corpus completion and the harness error of an invalid-action tail. An
observer sees a candidate only after it was checked, but the bundle as a whole is
accepted only when ``verify_bundle`` returns: whatever an observer gathered is
meaningless if it raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kiln_verify.openenv.records.rollout import ScoredRollout
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.openenv.verify.summary_pass import SummaryRecord

__all__ = ["CandidateObserver", "HarnessError", "VerifiedCandidate"]


@dataclass(frozen=True, slots=True)
class HarnessError:
    """The harness error that ended an ``invalid_model_action`` episode (§5.4)."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class VerifiedCandidate:
    """One candidate that passed §6.9.

    ``record`` is the summary's rollout record as pass 2 read it: a typed view of the very
    object pass 1 validated as a ``RolloutRecord`` (same values and types; an absent
    optional field reads as ``None``); ``completion`` its corpus completion;
    ``environment_index`` the environment of its group (§6.8: ``group_index mod n``).
    """

    environment_index: int
    record: SummaryRecord
    completion: ScoredRollout
    harness_error: HarnessError | None


class CandidateObserver(Protocol):
    """Receives the receipt, then every verified candidate, group-major then candidate order."""

    def start(self, summary: RolloutSummary) -> None:
        """The receipt as pass 1 validated it (only its first rollout record is kept)."""

    def candidate(self, verified: VerifiedCandidate) -> None: ...
