"""``--journal``/``--resume``: the same bytes as one uninterrupted collection, and refusals.

Each refusal is typed, names what differs and publishes nothing. The journal is cut the
way a crash leaves it (entries after some group missing, no seal) or edited the way a
tamperer would (:func:`~tests.openenv.collect.journals.forge` re-chains the digests).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from kiln_verify.errors import (
    JournalControlsChanged,
    JournalEntryTampered,
    JournalEntryTruncated,
    JournalEnvironmentChanged,
    JournalInvalid,
    JournalPlanMismatch,
    KilnError,
    UsageError,
)
from kiln_verify.openenv.collect.engine import ProgressEvent
from kiln_verify.openenv.collect.journal import SEAL, entry_name
from kiln_verify.openenv.collect.journaled import run_journaled
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from oracle.runner import ServerHandle
from tests.openenv.collect.journals import (
    NAMES,
    controls_in,
    files_of,
    forge,
    journaled,
    published,
    reference,
)


def _cut(journal: Path, keep: int, groups: int) -> None:
    """What a crash after ``keep`` whole groups leaves (a ``.partial`` of the next one)."""
    (journal / SEAL).unlink()
    for index in range(keep, groups):
        (journal / entry_name(index)).unlink()
    (journal / f".{entry_name(keep)}.partial").write_bytes(b"sha256:")


@pytest.fixture
def url(servers: dict[str, ServerHandle]) -> str:
    return servers["bandit"].base_url


def test_a_journaled_run_and_every_resume_publish_the_uninterrupted_bytes(
    url: str, tmp_path: Path
) -> None:
    controls = controls_in(tmp_path, url)
    expected = files_of(reference(controls))
    done, bundle = journaled(controls, tmp_path / "journal")
    assert bundle is not None
    assert files_of(bundle) == expected == published(tmp_path)
    assert done.resumed == 0
    for keep in (0, 3, 5):
        for name in NAMES:
            (tmp_path / name).unlink()
        _cut(tmp_path / "journal", keep, 6)
        done, bundle = journaled(controls, tmp_path / "journal", resume=True)
        assert done.resumed == keep
        assert bundle is not None
        assert published(tmp_path) == expected
    # killed after publishing, before exiting: the resume finds its bytes and succeeds
    done, bundle = journaled(controls, tmp_path / "journal", resume=True)
    assert done.resumed == 6
    assert published(tmp_path) == expected


def test_a_resume_with_nothing_journaled_starts_and_a_new_journal_must_be_empty(
    url: str, tmp_path: Path
) -> None:
    controls = controls_in(tmp_path, url, groups=2)
    journal = tmp_path / "journal"
    journal.mkdir()
    (journal / ".header.entry.partial").write_bytes(b"sha")  # killed writing the header
    done, bundle = journaled(controls, journal, resume=True)
    assert done.resumed == 0
    assert bundle is not None
    for name in NAMES:
        (tmp_path / name).unlink()
    with pytest.raises(UsageError) as refused:
        journaled(controls, journal)
    assert refused.value.fields == ("journal", "resume")
    assert not any((tmp_path / name).exists() for name in NAMES)


@pytest.fixture
def started(url: str, tmp_path: Path) -> Path:
    """A journal cut after two of its six groups."""
    journaled(controls_in(tmp_path, url), tmp_path / "journal")
    for name in NAMES:
        (tmp_path / name).unlink()
    _cut(tmp_path / "journal", 2, 6)
    return tmp_path / "journal"


@pytest.mark.parametrize(
    ("change", "error", "fields"),
    [
        ({"seed_start": 7}, JournalPlanMismatch, ("seed_start",)),
        ({"groups": 7}, JournalPlanMismatch, ("groups",)),
        ({"max_steps": 4}, JournalControlsChanged, ("max_steps",)),
        (
            {"temperature": 0.5, "concurrency": 1},
            JournalControlsChanged,
            ("concurrency", "temperature"),
        ),
    ],
)
def test_a_resume_with_other_controls_is_refused_naming_the_fields(
    url: str,
    tmp_path: Path,
    started: Path,
    change: dict[str, object],
    error: type[KilnError],
    fields: tuple[str, ...],
) -> None:
    with pytest.raises(error) as refused:
        journaled(controls_in(tmp_path, url, **change), started, resume=True)
    assert refused.value.fields == fields
    assert not any((tmp_path / name).exists() for name in NAMES)


def test_another_policy_or_range_is_refused(url: str, tmp_path: Path, started: Path) -> None:
    controls = controls_in(tmp_path, url)
    with pytest.raises(JournalControlsChanged) as refused:
        journaled(controls, started, resume=True, policy=RandomPolicy(name="other"))
    assert refused.value.fields == ("policy",)
    with pytest.raises(JournalPlanMismatch) as other:
        journaled(controls, started, resume=True, groups=range(0, 3))
    assert other.value.fields == ("groups_range",)


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_tampered_truncated_foreign_and_changed_journals_are_refused(
    url: str, tmp_path: Path, started: Path
) -> None:
    controls = controls_in(tmp_path, url)
    entry = started / entry_name(1)
    original = entry.read_bytes()

    def refused(error: type[KilnError]) -> KilnError:
        with pytest.raises(error) as caught:
            journaled(controls, started, resume=True)
        assert not any((tmp_path / name).exists() for name in NAMES)
        return caught.value

    _flip(entry, len(original) - 20)  # a byte of the record
    refused(JournalEntryTampered)
    entry.write_bytes(original[: len(original) // 2])
    refused(JournalEntryTruncated)
    entry.write_bytes(original)
    # re-chained by a careful tamperer: the record is no longer group 1 of the plan
    forge(started, group=lambda index, value: value["replay"].update(seed=99 if index else 0))
    assert "not group 1" in refused(JournalEntryTampered).rule
    forge(started, group=lambda index, value: value["replay"].update(seed=index))
    # a missing entry: a gap before group 1
    os.replace(started / entry_name(0), tmp_path / "moved")
    refused(JournalInvalid)  # a gap before group 1
    os.replace(tmp_path / "moved", started / entry_name(0))
    (started / "notes.txt").write_text("x")
    refused(JournalInvalid)
    (started / "notes.txt").unlink()

    def moved(header: dict[str, object]) -> None:
        inspections = header["environment_inspections"]
        assert isinstance(inspections, list)
        inspections[0]["identity"]["discovery_sha256"] = "sha256:" + "0" * 64

    forge(started, header=moved)
    assert "discovery_sha256" in refused(JournalEnvironmentChanged).rule


def test_a_journal_refuses_what_it_cannot_keep(url: str, tmp_path: Path) -> None:
    controls = controls_in(tmp_path, url)
    with pytest.raises(UsageError) as range_refused:
        journaled(controls, tmp_path / "j", groups=range(4, 9))
    assert range_refused.value.fields == ("groups_range",)
    grpo = dataclasses.replace(controls, grpo_output=str(tmp_path / "grpo.jsonl"))
    with pytest.raises(UsageError) as grpo_refused:
        journaled(grpo, tmp_path / "j")
    assert grpo_refused.value.fields == ("grpo_output", "journal")
    assert not (tmp_path / "j").exists()


def test_a_failed_entry_write_fails_the_run_and_publishes_nothing(url: str, tmp_path: Path) -> None:
    """The entries are written by a worker thread while the collection goes on; a write it
    cannot make (here: another writer's entry already holds the name of group 2, which a
    write never replaces) fails the run with the writer's refusal, publishes nothing, and
    leaves the journal as it was: its whole entries, and no staged file."""
    controls = controls_in(tmp_path, url)
    journal = tmp_path / "journal"
    rogue = b"another writer's entry\n"

    def interfere(event: ProgressEvent) -> None:
        if event.stage == "group" and event.completed == 1:
            (journal / entry_name(2)).write_bytes(rogue)

    with pytest.raises(JournalInvalid) as refused:
        asyncio.run(run_journaled(controls, RandomPolicy(), journal, progress=interfere))
    assert "journal entry group-00000002.entry already exists" in refused.value.rule
    assert refused.value.path == str(journal)
    assert not any((tmp_path / name).exists() for name in NAMES)
    names = set(os.listdir(journal))
    assert {"header.entry", entry_name(0), entry_name(1), entry_name(2)} <= names
    assert not any(name.endswith(".partial") for name in names)
    assert SEAL not in names
    assert (journal / entry_name(2)).read_bytes() == rogue
