"""Our own records of a collection journal and of a shard (docs/resume-and-shards.md).

Kiln has no journal and no shard: these records are kiln-verify's, named
``kiln-verify.openenv-journal*.v1``, and never appear in a bundle. A journal directory
holds one :class:`JournalHeader` (the controls, policy and environment inspections the
collection started with, and the group range it covers), one :class:`JournalGroup` per
finished group (the group's corpus line, replay group and summary rollout records: exactly
the Kiln records the bundle will hold for it) and, once the range is finished and every
environment revalidated, one :class:`JournalSeal`. A sealed journal is a *shard*; a sealed
journal of the whole plan builds the bundle on its own.

Each record is written as one framed file (:mod:`kiln_verify.openenv.collect.journal`):
its own SHA-256 and the record's JSON. Every group and the seal name the digest of
the record before them (``previous_sha256``), so the entries form one chain from the
header.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StrictInt, StrictStr

from kiln_verify.limits import MAX_ENVIRONMENTS, MAX_GROUP_SIZE, MAX_GROUPS
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.replay import ReplayGroup
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.summary import RolloutRecord
from kiln_verify.records import U64, BehaviorPolicyIdentity, FreeObject, Record, Sha256

__all__ = [
    "JOURNAL_GROUP_SCHEMA",
    "JOURNAL_SCHEMA",
    "JOURNAL_SEAL_SCHEMA",
    "JournalGroup",
    "JournalHeader",
    "JournalSeal",
]

JOURNAL_SCHEMA: Final = "kiln-verify.openenv-journal.v1"
JOURNAL_GROUP_SCHEMA: Final = "kiln-verify.openenv-journal-group.v1"
JOURNAL_SEAL_SCHEMA: Final = "kiln-verify.openenv-journal-seal.v1"


class JournalHeader(Record):
    """What the journal's collection is: its controls, policy, environments and range.

    ``options`` holds the collection options by name (checked as
    :class:`~kiln_verify.openenv.collect.controls.CollectionOptions` when read);
    ``groups_start``/``groups_stop`` the range ``[start, stop)`` of the plan it collects
    (the whole plan unless ``--groups-range``).
    """

    schema_: Literal["kiln-verify.openenv-journal.v1"] = Field(JOURNAL_SCHEMA, alias="schema")
    groups_start: U64
    groups_stop: U64
    environments: list[StrictStr] = Field(min_length=1, max_length=MAX_ENVIRONMENTS)
    reset_templates: list[FreeObject] = Field(min_length=1, max_length=MAX_ENVIRONMENTS)
    credential_envs: list[StrictStr | None] = Field(max_length=MAX_ENVIRONMENTS)
    options: FreeObject
    output_path: StrictStr
    replay_output_path: StrictStr
    summary_output_path: StrictStr
    reset_plan_sha256: Sha256
    behavior_policy: BehaviorPolicyIdentity
    environment_inspections: list[EnvironmentInspection] = Field(
        min_length=1, max_length=MAX_ENVIRONMENTS
    )


class JournalGroup(Record):
    """One finished group: the Kiln records the bundle holds for it, chained."""

    schema_: Literal["kiln-verify.openenv-journal-group.v1"] = Field(
        JOURNAL_GROUP_SCHEMA, alias="schema"
    )
    group_index: Annotated[StrictInt, Field(ge=0, lt=MAX_GROUPS)]
    previous_sha256: Sha256
    corpus: AgenticGroup
    replay: ReplayGroup
    rollouts: list[RolloutRecord] = Field(min_length=1, max_length=MAX_GROUP_SIZE)


class JournalSeal(Record):
    """The range is finished and every environment, inspected again after its last group,
    equalled the header's inspection."""

    schema_: Literal["kiln-verify.openenv-journal-seal.v1"] = Field(
        JOURNAL_SEAL_SCHEMA, alias="schema"
    )
    groups_start: U64
    groups_stop: U64
    previous_sha256: Sha256
