"""The synthetic bundle builder (kiln_verify.testing.bundles) keeps the promises its
docstring makes to the verifier's tests and benchmarks: the bundle verifies, candidate ``c``
of group ``g`` follows script ``(g + c + offset) % 5``, the same arguments give the same
bytes, and ``label`` reaches the places peer text reaches a report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.testing.bundles import (
    DATASET,
    EVERY_TAIL,
    REPLAY,
    SUMMARY,
    build_fixture_bundle,
)

#: The termination of each script, in the order of the module docstring.
SCRIPTS = ("done", "max_steps", "protocol_error", "invalid_model_action", "protocol_error")


def _candidates(directory: Path) -> list[dict[str, Any]]:
    replay = json.loads((directory / REPLAY).read_text(encoding="utf-8"))
    return [
        {"group": group["group_index"], **candidate}
        for group in replay["groups"]
        for candidate in group["candidates"]
    ]


@pytest.mark.parametrize("offset", [0, 2])
def test_each_candidate_follows_its_script_and_the_bundle_verifies(
    tmp_path: Path, offset: int
) -> None:
    built = build_fixture_bundle(tmp_path, groups=5, group_size=3, script_offset=offset)
    assert (built.dataset, built.replay, built.summary) == (
        tmp_path / DATASET,
        tmp_path / REPLAY,
        tmp_path / SUMMARY,
    )
    candidates = _candidates(tmp_path)
    assert len(candidates) == 15
    for candidate in candidates:
        script = (candidate["group"] + candidate["candidate_index"] + offset) % 5
        assert candidate["termination"] == SCRIPTS[script]
        # script 2 ends on a terminal SESSION_ERROR: the environment has no final state
        assert ("final_state" in candidate) == (script != 2)
    report = verify_bundle(built.summary)
    assert report.to_json()["groups"] == 5


def test_the_same_arguments_give_the_same_bytes(tmp_path: Path) -> None:
    first = build_fixture_bundle(tmp_path / "a", groups=4, pad=17, reasoning=5)
    second = build_fixture_bundle(tmp_path / "b", groups=4, pad=17, reasoning=5)
    for name in (DATASET, REPLAY, SUMMARY):
        assert (first.directory / name).read_bytes() == (second.directory / name).read_bytes()
    other = build_fixture_bundle(tmp_path / "c", groups=4, pad=18, reasoning=5)
    assert (other.directory / DATASET).read_bytes() != (first.directory / DATASET).read_bytes()


def test_the_label_reaches_names_descriptions_and_observations(tmp_path: Path) -> None:
    label = "<b>peer</b>"
    built = build_fixture_bundle(tmp_path, groups=2, label=label, tail_replies=EVERY_TAIL)
    replay = json.loads(built.replay.read_text(encoding="utf-8"))
    for environment in replay["environments"]:
        metadata = environment["identity"]["metadata"]
        assert metadata["name"].endswith(label)
        assert metadata["description"].endswith(label)
    for group in replay["groups"]:
        assert group["reset_observation"]["observation"]["note"] == label
    verify_bundle(built.summary)


def test_pad_grows_the_replay_and_reasoning_only_the_corpus(tmp_path: Path) -> None:
    base = build_fixture_bundle(tmp_path / "base", groups=2)
    padded = build_fixture_bundle(tmp_path / "pad", groups=2, pad=200)
    reasoned = build_fixture_bundle(tmp_path / "reason", groups=2, reasoning=200)

    def size(bundle: Any, name: str) -> int:
        return len((bundle.directory / name).read_bytes())

    assert size(padded, REPLAY) > size(base, REPLAY) + 200
    assert size(reasoned, REPLAY) == size(base, REPLAY)
    assert size(reasoned, DATASET) > size(base, DATASET) + 200
