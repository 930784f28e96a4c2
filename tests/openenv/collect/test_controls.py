"""§5.1 validation, the group plan, the retained budget and the model-action parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import LimitExceeded, UsageError
from kiln_verify.limits import MAX_RESET_OPTIONS_FILE_BYTES
from kiln_verify.openenv.collect import (
    ResetPlan,
    RetainedBudget,
    group_plan,
    load_reset_options,
    parse_model_action,
)
from kiln_verify.records import I64_MAX
from tests.openenv.collect.options import make_controls

URL = "http://127.0.0.1:1"


@pytest.mark.parametrize(
    ("urls", "options", "fragment"),
    [
        ([], {}, "`environments`"),
        ([URL, URL], {"groups": 1}, "at least the number of environments"),
        ([URL], {"groups": 200, "group_size": 100}, "MAX_ROLLOUTS"),
        ([URL], {"seed_start": I64_MAX, "groups": 2}, "i64"),
        ([URL], {"max_steps": 0}, "`max_steps`"),
        ([URL], {"concurrency": 257}, "`concurrency`"),
        ([URL], {"max_recoverable_errors": 65}, "`max_recoverable_errors`"),
        ([URL], {"capacity_wait_seconds": 0}, "`capacity_wait_seconds`"),
        ([URL], {"protocol_error_reward": float("nan")}, "finite"),
        ([URL], {"temperature": -0.5}, ">= 0"),
        ([URL], {"thinking": False, "thinking_budget_tokens": 4}, "requires `thinking`"),
        ([URL], {"thinking_budget_tokens": 256}, "`thinking_budget_tokens`"),
        ([URL], {"summary_output": "openenv.rollouts.jsonl"}, "distinct"),
    ],
)
def test_controls_refuse(urls: list[str], options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(")) as caught:
        make_controls(urls, **options)
    assert caught.value.exit_code == 2


def test_credential_and_template_slots_align() -> None:
    with pytest.raises(UsageError, match="credential_envs"):
        make_controls([URL, URL], credential_envs=["TOKEN"])
    with pytest.raises(UsageError, match="reset templates"):
        make_controls([URL, URL, URL], reset_templates=[{}, {}], groups=3)
    shared = make_controls([URL, URL], reset_templates=[{"level": 1}])
    assert shared.reset_templates == ({"level": 1}, {"level": 1})
    assert make_controls([URL], temperature=1).options.temperature == 1.0


def test_group_plan_rotates_and_overrides_the_seed() -> None:
    plan = ResetPlan.from_templates([{"seed": 5, "b": 1}, {}])
    assert plan.templates == ({"b": 1}, {})
    groups = list(group_plan(plan, 3, 7))
    assert [(g.group_index, g.environment_index, g.seed) for g in groups] == [
        (0, 0, 7),
        (1, 1, 8),
        (2, 0, 9),
    ]
    assert groups[0].reset_payload == {"b": 1, "seed": 7}
    assert list(groups[0].reset_payload) == ["b", "seed"]


def test_retained_budget_is_charged_incrementally() -> None:
    budget = RetainedBudget(bound=10)
    budget.charge({"a": 1}, what="x")  # 7 bytes
    with pytest.raises(LimitExceeded, match="MAX_RETAINED_BYTES"):
        budget.charge([12], what="an observation")


def test_reset_options_files(tmp_path: Path) -> None:
    good = tmp_path / "r.json"
    good.write_text('{"difficulty": 3}')
    assert load_reset_options(str(good)) == {"difficulty": 3}
    assert load_reset_options("-") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    with pytest.raises(UsageError, match="one strict JSON object"):
        load_reset_options(str(bad))
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(MAX_RESET_OPTIONS_FILE_BYTES + 1)
    with pytest.raises(LimitExceeded):
        load_reset_options(str(big))
    with pytest.raises(UsageError):
        load_reset_options(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"arm": 1}', {"arm": 1}),
        ('  {"arm": 1}\n', {"arm": 1}),
        ('```json\n{"arm": 2}\n```', {"arm": 2}),
        ('```JSON{"arm": 3}```', {"arm": 3}),
        ('```\n{"arm": 4}\n```', {"arm": 4}),
    ],
)
def test_parse_model_action_accepts(text: str, expected: dict[str, Any]) -> None:
    assert parse_model_action(text) == expected


@pytest.mark.parametrize(
    "text",
    ['{"arm": 1} extra', "[1]", "```json\n{}", "```", "arm 1", '{"a": 1, "a": 2}', "NaN"],
)
def test_parse_model_action_rejects(text: str) -> None:
    assert isinstance(parse_model_action(text), str)
