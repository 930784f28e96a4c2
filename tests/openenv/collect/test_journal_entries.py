"""The journal's entry framing, property-tested: a framed record reads back as itself; any
truncation is ``journal_entry_truncated``; any changed byte, any spliced or re-ordered
entry is refused (``journal_entry_tampered``, or ``journal_entry_truncated`` where the change
removed the last LF), never read as a record. No network: records are made in memory and
journals are directories of entries written by :class:`JournalWriter`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.core.digest import Sha256Digest
from kiln_verify.errors import (
    JournalEntryTampered,
    JournalEntryTruncated,
    JournalError,
    JournalInvalid,
    LimitExceeded,
)
from kiln_verify.openenv.collect.journal import (
    HEADER,
    SEAL,
    JournalWriter,
    entry_name,
    frame,
    read_journal,
    unframe,
)
from kiln_verify.openenv.collect.plan import RetainedBudget
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.journal import (
    JOURNAL_GROUP_SCHEMA,
    JOURNAL_SCHEMA,
    JOURNAL_SEAL_SCHEMA,
    JournalGroup,
    JournalHeader,
    JournalSeal,
)
from kiln_verify.openenv.records.replay import ReplayGroup
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.serialize import replay_group_tree, rollout_line_bytes
from kiln_verify.openenv.records.summary import RolloutRecord
from kiln_verify.records import BehaviorPolicyIdentity
from tests.openenv.records.fixtures import (
    BEHAVIOR,
    group_json,
    inspection,
    replay_json,
    summary_json,
)

DIGESTS = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "sha256:" + h)
SEALS = st.builds(
    lambda start, width, previous: JournalSeal(
        schema=JOURNAL_SEAL_SCHEMA,
        groups_start=start,
        groups_stop=start + width,
        previous_sha256=previous,
    ),
    st.integers(0, 2**40),
    st.integers(1, 2**20),
    DIGESTS,
)


@given(SEALS)
def test_a_framed_record_reads_back_as_itself(seal: JournalSeal) -> None:
    data, digest = frame(seal)
    assert unframe(data, JournalSeal, source="x") == (seal, digest)


@given(SEALS, st.data())
def test_every_truncation_is_refused_as_truncated(seal: JournalSeal, data: st.DataObject) -> None:
    framed, _ = frame(seal)
    cut = data.draw(st.integers(0, len(framed) - 1))
    with pytest.raises(JournalEntryTruncated):
        unframe(framed[:cut], JournalSeal, source="x")


@given(SEALS, st.data())
def test_every_changed_byte_is_refused(seal: JournalSeal, data: st.DataObject) -> None:
    framed, _ = frame(seal)
    at = data.draw(st.integers(0, len(framed) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda byte: byte != framed[at]))
    changed = framed[:at] + bytes([value]) + framed[at + 1 :]
    with pytest.raises((JournalEntryTampered, JournalEntryTruncated)):
        unframe(changed, JournalSeal, source="x")


@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_refused_with_a_journal_code(junk: bytes) -> None:
    with pytest.raises(JournalError):
        unframe(junk, JournalSeal, source="x")


def test_a_record_of_another_kind_under_a_valid_digest_is_tampered() -> None:
    data, _ = frame(
        JournalSeal(
            schema=JOURNAL_SEAL_SCHEMA,
            groups_start=0,
            groups_stop=1,
            previous_sha256="sha256:" + "a" * 64,
        )
    )
    with pytest.raises(JournalEntryTampered) as refused:
        unframe(data, JournalGroup, source="x")
    assert "JournalGroup" in refused.value.rule


def test_an_entry_framed_from_the_bundles_writing_is_the_entry_framed_whole(
    tmp_path: Path,
) -> None:
    """The collector hands the writer the group's corpus line and replay tree (what the
    bundle writes of it) so the group is not written twice; the entry reads back as the
    same record, and the same JSON value, as the entry written from the record alone."""
    entry = JournalGroup(
        schema=JOURNAL_GROUP_SCHEMA,
        group_index=0,
        previous_sha256="sha256:" + "b" * 64,
        corpus=AgenticGroup.from_json(group_json()),
        replay=ReplayGroup.from_json(replay_json()["groups"][0]),
        rollouts=[RolloutRecord.from_json(summary_json()["rollouts"][0])],
    )
    line = rollout_line_bytes(entry.corpus)
    tree = replay_group_tree(entry.replay)
    assert tree is not None
    whole, _ = frame(entry)
    writer = JournalWriter(tmp_path, Sha256Digest("b" * 64), RetainedBudget())
    name, spliced = writer.prepare(entry, {"corpus": orjson.Fragment(line[:-1]), "replay": tree})
    assert name == entry_name(0)
    assert line[:-1] in spliced
    assert orjson.loads(spliced.split(b"\n", 1)[1]) == orjson.loads(whole.split(b"\n", 1)[1])
    assert unframe(spliced, JournalGroup, source="x")[0] == entry
    assert unframe(whole, JournalGroup, source="x")[0] == entry


def _header(url: str) -> JournalHeader:
    return JournalHeader(
        schema=JOURNAL_SCHEMA,
        groups_start=0,
        groups_stop=GROUPS,
        environments=[url],
        reset_templates=[{}],
        credential_envs=[],
        options={},
        output_path="d.jsonl",
        replay_output_path="r.json",
        summary_output_path="s.json",
        reset_plan_sha256="sha256:" + "0" * 64,
        behavior_policy=BehaviorPolicyIdentity.from_json(dict(BEHAVIOR)),
        environment_inspections=[EnvironmentInspection.from_json(inspection())],
    )


def _write(root: Path, url: str) -> None:
    """A sealed journal of GROUPS fixture groups (the reader links, it does not plan)."""
    writer = JournalWriter.create(root, _header(url))
    replay = replay_json()["groups"][0]
    rollouts = summary_json()["rollouts"][:1]
    for index in range(GROUPS):
        writer.append(
            JournalGroup(
                schema=JOURNAL_GROUP_SCHEMA,
                group_index=index,
                previous_sha256=str(writer.last),
                corpus=AgenticGroup.from_json(group_json()),
                replay=ReplayGroup.from_json(replay),
                rollouts=[RolloutRecord.from_json(record) for record in rollouts],
            )
        )
    writer.seal(0, GROUPS)


GROUPS = 3
EDITS = ("swap", "drop", "stray", "unsealed-short", "foreign", "reseal")


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("journals")
    _write(root / "ours", "http://127.0.0.1:1")
    _write(root / "theirs", "http://127.0.0.1:2")
    return root


def _edit(root: Path, theirs: Path, edit: str) -> None:
    one, two = root / entry_name(1), root / entry_name(2)
    if edit == "swap" and one.exists() and two.exists():
        one_bytes = one.read_bytes()
        one.write_bytes(two.read_bytes())
        two.write_bytes(one_bytes)
    elif edit == "drop" and one.exists():
        one.unlink()
    elif edit == "stray":
        (root / "group-1.entry").write_bytes(b"")
    elif edit == "unsealed-short" and two.exists():
        two.unlink()
    elif edit == "foreign":
        one.write_bytes((theirs / entry_name(1)).read_bytes())
    else:
        (root / SEAL).write_bytes((theirs / SEAL).read_bytes())


def test_the_written_journal_reads_back(journals: Path) -> None:
    files = read_journal(journals / "ours")
    assert [group.group_index for group in files.groups] == list(range(GROUPS))
    assert files.seal is not None
    assert files.size == sum(p.stat().st_size for p in (journals / "ours").iterdir())


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(EDITS), min_size=1, max_size=3, unique=True))
def test_a_reordered_gapped_padded_or_spliced_chain_is_refused(
    journals: Path, edits: list[str]
) -> None:
    root = journals / f"copy-{len(os.listdir(journals))}"
    shutil.copytree(journals / "ours", root)
    for edit in edits:
        _edit(root, journals / "theirs", edit)
    with pytest.raises((JournalEntryTampered, JournalInvalid)):
        read_journal(root)


def test_a_writer_never_replaces_an_entry(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    writer = JournalWriter.create(root, _header("http://127.0.0.1:1"))
    (root / SEAL).write_bytes(b"kept")
    with pytest.raises(JournalInvalid):
        writer.seal(0, 1)
    assert (root / SEAL).read_bytes() == b"kept"
    assert sorted(p.name for p in root.iterdir()) == [HEADER, SEAL]


def test_a_journal_is_bounded_by_the_retained_budget(journals: Path, tmp_path: Path) -> None:
    """Reading charges each entry's size before reading it; writing charges what it
    writes: either side past the bound is ``limit_exceeded``."""
    size = read_journal(journals / "ours").size
    with pytest.raises(LimitExceeded) as read_refused:
        read_journal(journals / "ours", RetainedBudget(size - 1))
    assert read_refused.value.limit == "MAX_RETAINED_BYTES"
    files = read_journal(journals / "ours", RetainedBudget(size))
    assert files.size == size
    writer = JournalWriter(tmp_path, files.last_sha256, RetainedBudget(10))
    with pytest.raises(LimitExceeded):
        writer.seal(0, GROUPS)
    assert list(tmp_path.iterdir()) == []
