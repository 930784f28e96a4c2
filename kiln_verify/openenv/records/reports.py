"""Reports of offline verification and live replay, and the artifact-download receipt.

``kiln.openenv-verification.v1`` (contract §2.8), ``kiln.openenv-replay-run.v1`` (§2.9)
and ``kiln.openenv-artifact-download.v1`` (§2.11) are exactly Kiln's closed records: the
same keys, none added (checked against Kiln's published schema by
``tests/openenv/records/test_kiln_published_schemas.py``). Written as pretty JSON + LF by
:func:`kiln_verify.openenv.records.serialize.report_bytes`.

What a live replay knows beyond Kiln's record lives in a record of our own name,
``kiln-verify.replay-run-notes.v1`` (:class:`ReplayRunNotes`): ``volatile`` (the state
fields compared by presence and JSON type only, :mod:`kiln_verify.openenv.volatile`) and
``environment_remaps`` (each captured environment replayed at another base URL, by
``--environment-url`` or the embedded oracle). ``openenv replay --json`` prints the two
side by side (:class:`ReplayRunResult`: ``{"report": ..., "kiln_verify": ...}``), so the
report stays a document Kiln's schema accepts, whatever the replay needed.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field, StrictStr

from kiln_verify.limits import MAX_BASE_URL_CHARS, MAX_OPENENV_DATASET_BYTES
from kiln_verify.records import U64, IdentityText, Record, Sha256

__all__ = [
    "ARTIFACT_DOWNLOAD_SCHEMA",
    "REPLAY_NOTES_SCHEMA",
    "REPLAY_RUN_SCHEMA",
    "VERIFICATION_SCHEMA",
    "ArtifactDownloadReceipt",
    "EnvironmentRemap",
    "ReplayRunNotes",
    "ReplayRunReport",
    "ReplayRunResult",
    "VerificationReport",
]

VERIFICATION_SCHEMA: Final = "kiln.openenv-verification.v1"
REPLAY_RUN_SCHEMA: Final = "kiln.openenv-replay-run.v1"
ARTIFACT_DOWNLOAD_SCHEMA: Final = "kiln.openenv-artifact-download.v1"
REPLAY_NOTES_SCHEMA: Final = "kiln-verify.replay-run-notes.v1"

_Path = Annotated[StrictStr, Field(min_length=1)]
_Positive = Annotated[U64, Field(ge=1)]


class VerificationReport(Record):
    """What a successful offline verification checked: resolved paths, digests, counts."""

    schema_: Literal["kiln.openenv-verification.v1"] = Field(VERIFICATION_SCHEMA, alias="schema")
    summary_path: _Path
    dataset_path: _Path
    replay_path: _Path
    dataset_sha256: Sha256
    replay_sha256: Sha256
    groups: _Positive
    rollouts: _Positive
    environment_exchanges: U64


_Url = Annotated[StrictStr, Field(min_length=1, max_length=MAX_BASE_URL_CHARS)]


class EnvironmentRemap(Record):
    """A captured environment replayed at another base URL; every other identity field is
    still compared exactly. ``source``: ``environment_url`` (``--environment-url
    OLD=NEW``) or ``oracle`` (the embedded oracle ``oracle``, on a fresh port)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"oracle"})

    environment_index: U64
    recorded_base_url: _Url
    base_url: _Url
    source: Literal["environment_url", "oracle"]
    oracle: IdentityText | None = None


class ReplayRunReport(Record):
    """What a successful live replay re-ran against the live environments (Kiln's record)."""

    schema_: Literal["kiln.openenv-replay-run.v1"] = Field(REPLAY_RUN_SCHEMA, alias="schema")
    replay_sha256: Sha256
    environments: _Positive
    groups: _Positive
    rollouts: _Positive
    environment_exchanges: U64
    capacity_retries: U64
    environment_prefix_only_rollouts: U64


class ReplayRunNotes(Record):
    """``kiln-verify.replay-run-notes.v1``: what our replay adds to Kiln's report.

    Both lists are always written (empty when the replay compared every state field
    exactly and reached every environment at its recorded base URL), so a reader never has
    to tell "none" from "not recorded".
    """

    schema_: Literal["kiln-verify.replay-run-notes.v1"] = Field(REPLAY_NOTES_SCHEMA, alias="schema")
    volatile: list[_Path]
    environment_remaps: list[EnvironmentRemap]


class ReplayRunResult(Record):
    """``openenv replay --json`` after a clean replay: Kiln's exact report, and beside it
    (never inside it) our notes under ``kiln_verify``."""

    report: ReplayRunReport
    notes: ReplayRunNotes = Field(alias="kiln_verify")


class ArtifactDownloadReceipt(Record):
    """Local receipt of ``kiln openenv artifact --json`` (never embeds the Kiln base URL)."""

    schema_: Literal["kiln.openenv-artifact-download.v1"] = Field(
        ARTIFACT_DOWNLOAD_SCHEMA, alias="schema"
    )
    run_id: Annotated[
        StrictStr,
        Field(
            pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        ),
    ]
    kind: Annotated[StrictStr, Field(min_length=1)]
    source_url: Annotated[
        StrictStr, Field(pattern=r"^/v1/openenv/runs/[0-9a-fA-F-]{36}/artifacts/[^/?#]+$")
    ]
    output_path: _Path
    sha256: Sha256
    bytes: Annotated[U64, Field(le=MAX_OPENENV_DATASET_BYTES)]
