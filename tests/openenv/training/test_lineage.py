"""The kiln.openenv-training-data.v1 lineage of a real selected corpus, and its refusals."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.errors import KilnError
from kiln_verify.openenv.training.corpus import lineage_from_corpus, lineage_from_groups
from kiln_verify.openenv.training.lineage import read_training_data
from kiln_verify.openenv.training.selection import select_for_training
from tests.openenv.training.conftest import Collected


def corpus(collected: Collected) -> bytes:
    return select_for_training(collected.groups).corpus_bytes()


def lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def jsonl(values: list[dict[str, Any]]) -> bytes:
    return b"".join(
        json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for v in values
    )


def independent_plan(values: list[dict[str, Any]]) -> str:
    """§3.3's group plan digest, written out again with the standard library only."""
    digest = hashlib.sha256(b"kiln.openenv-group-plan.v1\x00")
    for index, group in enumerate(values, start=1):
        first = group["completions"][0]["openenv"]
        item = {"schema": "kiln.openenv-group-plan-item.v1", "group_index": index}
        for key in (
            "environment_name",
            "environment_base_url",
            "openapi_version",
            "discovery_sha256",
            "environment_schema_sha256",
            "action_schema_sha256",
            "reset_sha256",
            "seed",
        ):
            item[key] = first.get(key)
        item["rollouts"] = len(group["completions"])
        encoded = json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return "sha256:" + digest.hexdigest()


def test_the_lineage_of_a_real_selected_corpus(collected: Collected) -> None:
    data = corpus(collected)
    values = lines(data)
    lineage = lineage_from_corpus(data)
    assert lineage == lineage_from_groups(select_for_training(collected.groups).groups)
    assert lineage.group_plan_sha256 == independent_plan(values)
    completions = [c["openenv"] for v in values for c in v["completions"]]
    assert (lineage.groups, lineage.rollouts) == (4, 8)
    assert (lineage.seed_min, lineage.seed_max, lineage.unique_seeds) == ("1", "4", 4)
    assert lineage.total_steps == sum(c["steps"] for c in completions)
    ended = [c["termination"] for c in completions]
    assert lineage.terminations.max_steps == ended.count("max_steps")
    assert lineage.behavior_policy == collected.summary.behavior_policy
    (environment,) = lineage.environments
    assert environment.environment_base_url == completions[0]["environment_base_url"]
    assert environment.discovery_sha256 == completions[0]["discovery_sha256"]
    assert (environment.groups, environment.rollouts) == (4, 8)
    document = lineage.to_json()
    assert list(document) == [
        "schema", "groups", "rollouts", "unique_seeds", "seed_min", "seed_max", "total_steps",
        "terminations", "group_plan_sha256", "behavior_policy", "environments",
    ]  # fmt: skip
    assert read_training_data(document) == lineage


def test_one_environment_per_base_url_sorted_by_url(collected: Collected) -> None:
    values = lines(corpus(collected))
    for group in values[:2]:  # a second endpoint, earlier in byte order than the oracle's
        for completion in group["completions"]:
            completion["openenv"]["environment_base_url"] = "http://0.example"
    lineage = lineage_from_corpus(jsonl(values))
    urls = [e.environment_base_url for e in lineage.environments]
    assert urls == sorted(urls)
    assert urls[0] == "http://0.example"
    assert [e.groups for e in lineage.environments] == [2, 2]
    assert lineage.group_plan_sha256 == independent_plan(values)


def _mutate(values: list[dict[str, Any]], rule: str) -> None:
    completions = values[1]["completions"]
    if rule == "training_data_not_openenv":
        del completions[1]["openenv"]
    elif rule == "training_data_reward_mismatch":
        completions[1]["reward"] = completions[1]["reward"] + 0.5
    elif rule == "training_data_group_mismatch":
        completions[1]["openenv"]["seed"] += 100
    elif rule == "training_data_environment_drift":
        for completion in completions:
            completion["openenv"]["environment_name"] = "another name"
    elif rule == "training_data_behavior_policy_mixed":
        completions[0]["openenv"]["behavior_policy"]["served_model_id"] = "another model"
    else:
        raise AssertionError(rule)


@pytest.mark.parametrize(
    "code",
    [
        "training_data_not_openenv",
        "training_data_reward_mismatch",
        "training_data_group_mismatch",
        "training_data_environment_drift",
        "training_data_behavior_policy_mixed",
    ],
)
def test_each_semantic_rule_has_its_own_code(collected: Collected, code: str) -> None:
    values = lines(corpus(collected))
    _mutate(values, code)
    with pytest.raises(KilnError) as caught:
        lineage_from_corpus(jsonl(values))
    assert caught.value.code == code


def test_an_empty_corpus_has_no_lineage() -> None:
    with pytest.raises(KilnError) as caught:
        lineage_from_corpus(b"")
    assert caught.value.code == "training_data_empty"


def test_decimal_u64_seeds(collected: Collected) -> None:
    document = lineage_from_corpus(corpus(collected)).to_json()
    for text, accepted in (("18446744073709551615", True), ("18446744073709551616", False),
                           ("01", False), ("-1", False), ("1.0", False)):  # fmt: skip
        changed = {**document, "seed_max": text}
        if accepted:
            assert read_training_data(changed).seed_max == text
        else:
            with pytest.raises(KilnError) as caught:
                read_training_data(changed)
            assert caught.value.code == "record_invalid"
    with pytest.raises(KilnError) as caught:
        read_training_data({**document, "seed_min": 1})
    assert caught.value.code == "record_invalid"


COUNTS = [
    ("groups",),
    ("rollouts",),
    ("unique_seeds",),
    ("total_steps",),
    ("terminations", "done"),
    ("terminations", "max_steps"),
    ("environments", 0, "groups"),
    ("environments", 0, "rollouts"),
    ("environments", 0, "total_steps"),
    ("environments", 0, "terminations", "invalid_model_action"),
]


@settings(max_examples=40, deadline=None)
@given(path=st.sampled_from(COUNTS), delta=st.integers(min_value=1, max_value=3))
def test_a_tampered_total_is_refused_by_its_own_code(
    collected: Collected, path: tuple[Any, ...], delta: int
) -> None:
    document = lineage_from_corpus(corpus(collected)).to_json()
    target: Any = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] += delta
    with pytest.raises(KilnError) as caught:
        read_training_data(document)
    assert caught.value.code == "training_data_totals_inconsistent"


def test_unsorted_environments_are_inconsistent(collected: Collected) -> None:
    values = lines(corpus(collected))
    for completion in values[0]["completions"]:
        completion["openenv"]["environment_base_url"] = "http://0.example"
    document = lineage_from_corpus(jsonl(values)).to_json()
    document["environments"].reverse()
    with pytest.raises(KilnError) as caught:
        read_training_data(document)
    assert caught.value.code == "training_data_totals_inconsistent"
