"""Training selection (§5.7): the unit example, a real collection, and the count laws."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.openenv.records.rollout import AgenticGroup, ScoredRollout
from kiln_verify.openenv.training.selection import is_no_output, select_for_training
from kiln_verify.records import TurnSegment
from tests.openenv.training.conftest import Collected


def with_reward(completion: ScoredRollout, reward: float) -> ScoredRollout:
    """A real completion with another reward (and the same episode return, bit for bit)."""
    openenv = completion.openenv.model_copy(update={"episode_return": reward})
    return completion.model_copy(update={"reward": reward, "openenv": openenv})


def templates(collected: Collected) -> tuple[ScoredRollout, ScoredRollout]:
    """A silent (no-output) and a speaking completion from the real collection."""
    group = collected.groups[1].completions
    assert is_no_output(group[0])
    assert not is_no_output(group[1])
    return group[0], group[1]


def make_group(collected: Collected, members: list[float | None]) -> AgenticGroup:
    """``None`` is a no-output completion; a float a speaking one with that reward."""
    silent, speaking = templates(collected)
    completions = [silent if m is None else with_reward(speaking, m) for m in members]
    return collected.groups[1].model_copy(update={"completions": completions})


def test_the_contract_s_unit_example(collected: Collected) -> None:
    groups = [
        make_group(collected, [None, None]),
        make_group(collected, [0.0, 0.0]),
        make_group(collected, [None, 0.0, 1.0]),
    ]
    selection = select_for_training(groups)
    record = selection.record
    assert (record.groups_submitted, record.rollouts_submitted) == (1, 2)
    assert record.no_output_rollouts_discarded == 3
    assert record.no_usable_output_groups_skipped == 1
    assert record.no_reward_gradient_groups_skipped == 1
    assert record.warnings is not None
    assert len(record.warnings) == 3
    assert [w.split(":")[0] for w in record.warnings] == ["group 0", "group 1", "group 2"]
    (kept,) = selection.groups
    assert [c.reward for c in kept.completions] == [0.0, 1.0]
    assert kept.completions == groups[2].completions[1:]


def test_a_real_collection(collected: Collected) -> None:
    selection = select_for_training(collected.groups)
    record = selection.record
    assert record.no_usable_output_groups_skipped == 1  # group 0: nobody spoke
    assert record.no_reward_gradient_groups_skipped == 1  # group 5: same arm, same seed
    assert record.no_output_rollouts_discarded == 3 + 4 + 1
    assert (record.groups_submitted, record.rollouts_submitted) == (4, 8)
    assert [g.completions[0].openenv.seed for g in selection.groups] == [1, 2, 3, 4]
    # group 0 skipped, groups 1-5 each a partial discard, group 5 also skipped
    assert record.warnings is not None
    assert len(record.warnings) == 7
    # the selected corpus is the collector's own line bytes of the kept groups
    assert selection.corpus_bytes().count(b"\n") == 4


def test_nothing_selected_is_an_empty_corpus(collected: Collected) -> None:
    selection = select_for_training([collected.groups[0]])
    assert selection.groups == ()
    assert selection.corpus_bytes() == b""
    assert selection.record.to_json()["groups_submitted"] == 0


def test_signed_zeros_are_equal_rewards(collected: Collected) -> None:
    record = select_for_training([make_group(collected, [0.0, -0.0])]).record
    assert record.no_reward_gradient_groups_skipped == 1
    assert record.warnings is not None
    assert record.to_json().get("warnings") == record.warnings


def test_no_warnings_are_omitted(collected: Collected) -> None:
    record = select_for_training([make_group(collected, [0.0, 1.0])]).record
    assert "warnings" not in record.to_json()


def _ending(collected: Collected, content: str) -> ScoredRollout:
    speaking = templates(collected)[1]
    last = TurnSegment.full_warning(content)
    return speaking.model_copy(update={"trajectory": [*speaking.trajectory[:-1], last]})


def test_only_the_json_pointer_makes_no_output(collected: Collected) -> None:
    code = '{"openenv_harness_error":{"code":"MODEL_ACTION_NO_OUTPUT","message":"m"},"done":true}'
    assert is_no_output(_ending(collected, code))
    for content in (
        '{"openenv_harness_error":{"code":"INVALID_MODEL_ACTION","message":"m"},"done":true}',
        '["openenv_harness_error", "MODEL_ACTION_NO_OUTPUT"]',
        '{"openenv_harness_error": "MODEL_ACTION_NO_OUTPUT"}',
        'not json "openenv_harness_error" MODEL_ACTION_NO_OUTPUT',
        '{"error":{"openenv_harness_error":{"code":"MODEL_ACTION_NO_OUTPUT"}}}',
    ):
        assert not is_no_output(_ending(collected, content)), content


MEMBERS = st.lists(st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.0, 0.5])), min_size=1)


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(MEMBERS, max_size=6))
def test_counts_add_up_and_every_submitted_group_has_a_gradient(
    collected: Collected, shapes: list[list[float | None]]
) -> None:
    groups = [make_group(collected, members) for members in shapes]
    selection = select_for_training(groups)
    record = selection.record
    total = sum(len(members) for members in shapes)
    silent = sum(m is None for members in shapes for m in members)
    flat = [
        [m for m in members if m is not None]
        for members in shapes
        if any(m is not None for m in members)
    ]
    flat_skipped = sum(len(kept) for kept in flat if len(set(kept)) == 1)
    assert record.no_output_rollouts_discarded == silent
    assert record.rollouts_submitted + silent + flat_skipped == total
    assert (
        record.groups_submitted
        + record.no_usable_output_groups_skipped
        + record.no_reward_gradient_groups_skipped
        == len(shapes)
    )
    assert record.groups_submitted == len(selection.groups)
    for group in selection.groups:
        rewards = [c.reward for c in group.completions]
        assert not any(is_no_output(c) for c in group.completions)
        assert any(r != rewards[0] for r in rewards)
    partial = sum(0 < sum(m is None for m in ms) < len(ms) for ms in shapes)
    skipped = record.no_usable_output_groups_skipped + record.no_reward_gradient_groups_skipped
    assert len(record.warnings or []) == partial + skipped
    indices = [int(w.split(":")[0].removeprefix("group ")) for w in record.warnings or []]
    assert indices == sorted(indices)
    assert all(0 <= i < len(shapes) for i in indices)
