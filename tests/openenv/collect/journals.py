"""Test helpers for journals: a journaled collection in one call, and a forger that rewrites
a journal's records and re-chains every digest (what a careful tamperer would do)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kiln_verify.openenv.collect import Bundle, build_bundle, collect
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.journal import HEADER, SEAL, entry_name, frame, read_journal
from kiln_verify.openenv.collect.journaled import JournaledCollection, run_journaled
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.records.journal import JournalGroup, JournalHeader
from tests.openenv.collect.options import make_controls

NAMES = ("openenv.rollouts.jsonl", "openenv.replay.json", "openenv.rollout-summary.json")


def controls_in(directory: Path, url: str, **options: Any) -> CollectionControls:
    settings: dict[str, Any] = {"groups": 6, "group_size": 2, "max_steps": 3, **options}
    return make_controls(
        [url],
        output=str(directory / NAMES[0]),
        replay_output=str(directory / NAMES[1]),
        summary_output=str(directory / NAMES[2]),
        **settings,
    )


def reference(controls: CollectionControls) -> Bundle:
    """The bundle of one uninterrupted collection (built, not published)."""
    return build_bundle(asyncio.run(collect(controls, RandomPolicy())))


def journaled(
    controls: CollectionControls,
    journal: Path,
    *,
    resume: bool = False,
    groups: range | None = None,
    policy: Policy | None = None,
) -> tuple[JournaledCollection, Bundle | None]:
    return asyncio.run(
        run_journaled(controls, policy or RandomPolicy(), journal, resume=resume, groups=groups)
    )


def files_of(bundle: Bundle) -> tuple[bytes, bytes, bytes]:
    return bundle.dataset, bundle.replay, bundle.summary


def published(directory: Path) -> tuple[bytes, ...]:
    return tuple((directory / name).read_bytes() for name in NAMES)


def forge(
    journal: Path,
    *,
    header: Callable[[dict[str, Any]], None] | None = None,
    group: Callable[[int, dict[str, Any]], None] | None = None,
) -> None:
    """Rewrite the header and group records through the edits and re-chain every digest."""
    files = read_journal(journal)
    document = files.header.to_json()
    if header is not None:
        header(document)
    data, last = frame(JournalHeader.model_validate(document))
    (journal / HEADER).write_bytes(data)
    for entry in files.groups:
        value = entry.to_json()
        value["previous_sha256"] = str(last)
        if group is not None:
            group(entry.group_index, value)
        data, last = frame(JournalGroup.model_validate(value))
        (journal / entry_name(entry.group_index)).write_bytes(data)
    if files.seal is not None:
        seal = files.seal.to_json()
        seal["previous_sha256"] = str(last)
        data, _ = frame(type(files.seal).model_validate(seal))
        (journal / SEAL).write_bytes(data)
