"""Pairing drift is refused with a typed error naming the group (no unpaired estimate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kiln_verify.errors import EvaluationPairingMismatch
from kiln_verify.openenv.evaluate import PairedBundle, build_receipt, check_pairing, load_bundle
from kiln_verify.openenv.records.replay import ReplayManifest
from tests.openenv.evaluate.conftest import Lane, summary_of

Mutation = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def sides(lane: Lane) -> tuple[PairedBundle, PairedBundle]:
    baseline, _ = load_bundle(summary_of(lane.directory, "baseline"))
    candidate, _ = load_bundle(summary_of(lane.directory, "candidate"))
    return baseline, candidate


def with_replay(side: PairedBundle, mutate: Mutation) -> PairedBundle:
    data = side.replay.to_json()
    mutate(data)
    replay = ReplayManifest.from_json(data)
    return PairedBundle(side.summary, replay, side.summary_sha256, side.summary_path)


def test_the_lane_is_paired(sides: tuple[PairedBundle, PairedBundle]) -> None:
    check_pairing(*sides)


def _observation(data: dict[str, Any]) -> None:
    data["groups"][3]["reset_observation"]["observation"]["pulls"] = 1


def _reward_tag(data: dict[str, Any]) -> None:
    data["groups"][4]["reset_observation"]["reward"] = 0.0


def _seed(data: dict[str, Any]) -> None:
    data["groups"][5]["seed"] += 1


def _payload(data: dict[str, Any]) -> None:
    data["groups"][6]["reset_payload"]["difficulty"] = 3


def _environment_index(data: dict[str, Any]) -> None:
    data["groups"][7]["environment_index"] = 1


def _group_index(data: dict[str, Any]) -> None:
    data["groups"][8]["group_index"] = 9


def _candidates(data: dict[str, Any]) -> None:
    data["groups"][9]["candidates"][0]["candidate_index"] = 1


@pytest.mark.parametrize(
    ("mutate", "location", "words"),
    [
        (_observation, "group 3", "reset observation"),
        (_reward_tag, "group 4", "reset observation"),
        (_seed, "group 5", "seed"),
        (_payload, "group 6", "reset payload"),
        (_environment_index, "group 7", "environment_index"),
        (_group_index, "group 8", "group_index"),
        (_candidates, "group 9", "candidate indices"),
    ],
)
def test_group_drift_names_the_group(
    sides: tuple[PairedBundle, PairedBundle], mutate: Mutation, location: str, words: str
) -> None:
    baseline, candidate = sides
    drifted = with_replay(candidate, mutate)
    with pytest.raises(EvaluationPairingMismatch) as caught:
        check_pairing(baseline, drifted)
    assert caught.value.location == location
    assert words in caught.value.rule
    assert location in str(caught.value)
    # either side may be the one that drifted; no receipt is ever built
    with pytest.raises(EvaluationPairingMismatch):
        build_receipt(drifted, candidate)


def test_identity_and_schema_drift(sides: tuple[PairedBundle, PairedBundle]) -> None:
    baseline, candidate = sides

    def identity(data: dict[str, Any]) -> None:
        data["environments"][0]["identity"]["metadata"]["version"] = "9.9.9"

    def schema(data: dict[str, Any]) -> None:
        data["environments"][0]["schema"]["action"]["title"] = "Other"

    for mutate, words in ((identity, "identity"), (schema, "schemas")):
        with pytest.raises(EvaluationPairingMismatch) as caught:
            check_pairing(baseline, with_replay(candidate, mutate))
        assert caught.value.location == "environment 0"
        assert words in caught.value.rule


def test_group_count_drift(sides: tuple[PairedBundle, PairedBundle]) -> None:
    baseline, candidate = sides

    def drop(data: dict[str, Any]) -> None:
        data["groups"].pop()

    with pytest.raises(EvaluationPairingMismatch) as caught:
        check_pairing(baseline, with_replay(candidate, drop))
    assert caught.value.location == "groups"


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_steps", 2), ("temperature", 0.5), ("protocol_error_reward", -2.0), ("thinking", True)],
)
def test_option_drift(sides: tuple[PairedBundle, PairedBundle], name: str, value: object) -> None:
    baseline, candidate = sides
    summary = candidate.summary.model_copy(update={name: value})
    drifted = PairedBundle(summary, candidate.replay, candidate.summary_sha256, "c.json")
    with pytest.raises(EvaluationPairingMismatch) as caught:
        check_pairing(baseline, drifted)
    assert caught.value.location == "options"
    assert name in caught.value.rule
    assert caught.value.path == "c.json"


def test_negative_zero_penalty_is_drift(sides: tuple[PairedBundle, PairedBundle]) -> None:
    baseline, candidate = sides
    zero = baseline.summary.model_copy(update={"protocol_error_reward": 0.0})
    negative = candidate.summary.model_copy(update={"protocol_error_reward": -0.0})
    left = PairedBundle(zero, baseline.replay, baseline.summary_sha256, "b.json")
    right = PairedBundle(negative, candidate.replay, candidate.summary_sha256, "c.json")
    with pytest.raises(EvaluationPairingMismatch):
        check_pairing(left, right)
