"""The random policy reads legal moves under the names environments use."""

from __future__ import annotations

from typing import Any

import pytest

from kiln_verify.openenv.policy.legal_moves import LEGAL_MOVE_KEYS, MAX_LEGAL_MOVES, legal_moves
from kiln_verify.openenv.policy.random_policy import random_action

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"move": {"type": "string"}, "metadata": {"type": "object"}},
    "required": ["move"],
}


def test_the_names_and_their_order() -> None:
    assert LEGAL_MOVE_KEYS == ("legal_actions", "legal_moves", "valid_actions")
    both = {"valid_actions": ["x"], "legal_moves": ["y"]}
    assert legal_moves(both) == ["y"]
    assert legal_moves({"legal_actions": [], "valid_actions": ["z"]}) == ["z"]


@pytest.mark.parametrize("key", LEGAL_MOVE_KEYS)
def test_every_name_is_read_at_the_top_level_and_in_metadata(key: str) -> None:
    moves = ["e2e4", "d2d4", "g1f3"]
    for observation in ({key: moves}, {"metadata": {key: moves}}):
        picks = {random_action(SCHEMA, observation, seed)["move"] for seed in range(60)}
        assert picks == set(moves)


def test_top_level_wins_over_metadata() -> None:
    observation = {"legal_moves": ["a"], "metadata": {"legal_moves": ["b"]}}
    assert legal_moves(observation) == ["a"]


def test_object_moves_are_whole_actions() -> None:
    observation = {"valid_actions": [{"move": "look", "target": "door"}]}
    assert random_action(SCHEMA, observation, 3) == {"move": "look", "target": "door"}


@pytest.mark.parametrize(
    "observation",
    [None, [], {"legal_moves": "e2e4"}, {"legal_moves": []}, {"metadata": ["x"]}, {"moves": [1]}],
)
def test_no_list_means_no_moves(observation: Any) -> None:
    assert legal_moves(observation) == []


def test_a_schema_enum_is_the_fallback_list() -> None:
    schema = {"type": "object", "properties": {"move": {"enum": ["n", "s", "e", "w"]}},
              "required": ["move"]}
    picks = {random_action(schema, {"board": "..."}, seed)["move"] for seed in range(80)}
    assert picks == {"n", "s", "e", "w"}


def test_the_list_is_bounded() -> None:
    moves = list(range(MAX_LEGAL_MOVES + 10))
    assert legal_moves({"legal_actions": moves}) == moves[:MAX_LEGAL_MOVES]


def test_seeded_choice_is_the_same_for_every_name() -> None:
    moves = ["a", "b", "c", "d"]
    chosen = [[random_action(SCHEMA, {key: moves}, seed) for seed in range(20)]
              for key in LEGAL_MOVE_KEYS]
    assert chosen[0] == chosen[1] == chosen[2]
