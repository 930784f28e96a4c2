"""The workloads' small step programs: output parsing and data selection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from qualification.tools.interop_gate import parse
from qualification.tools.sft_from_rollouts import best_rows
from tests.qualification.fixture import REPO

GATE_OUTPUT = """inventory: our oracle, 23 servers (8 math)
started counter pid 1 port 18990
all 23 servers healthy
== interop suite (tests/gate)
...........                                                              [100%]
11 passed in 41.37s
"""


def test_the_gate_counts_are_parsed_from_its_output() -> None:
    assert parse(GATE_OUTPUT) == {
        "servers": 23, "passed": 11, "failed": 0, "skipped": 0, "errors": 0, "deselected": 0,
    }  # fmt: skip
    failing = GATE_OUTPUT.replace("11 passed in", "2 failed, 8 passed, 1 skipped, 3 errors in")
    assert parse(failing) == {
        "servers": 23, "passed": 8, "failed": 2, "skipped": 1, "errors": 3, "deselected": 0,
    }  # fmt: skip


def test_a_gate_that_never_started_reports_missing_counts() -> None:
    assert parse("error: server g2048 did not answer /health after 100 attempts\n") == {
        "servers": -1, "passed": -1, "failed": -1, "skipped": -1, "errors": -1, "deselected": -1,
    }  # fmt: skip


def _group(rewards: list[float], actions: list[str]) -> dict[str, object]:
    completions = [
        {"reward": reward, "trajectory": [{"role": "assistant", "content": text, "kind": "action"}]}
        for reward, text in zip(rewards, actions, strict=True)
    ]
    return {"messages": [{"role": "user", "content": "pick"}], "completions": completions}


def test_sft_rows_take_the_best_candidate_with_an_action(tmp_path: Path) -> None:
    corpus = tmp_path / "rollouts.jsonl"
    groups = [
        _group([0.0, 1.0, 1.0], ['{"arm":1}', '{"arm":2}', '{"arm":3}']),  # tie: lowest index
        _group([1.0, 0.0], ["  ", '</think>{"arm":4}']),  # the best has no action
        _group([-1.0], [""]),  # nothing usable
    ]
    corpus.write_text("".join(json.dumps(g) + "\n" for g in groups))
    rows = best_rows(corpus)
    assert [row["messages"][-1] for row in rows] == [  # type: ignore[index]
        {"role": "assistant", "content": '{"arm":2}'},
        {"role": "assistant", "content": '{"arm":4}'},
    ]


def test_grpo_selection_keeps_only_groups_with_a_reward_spread(tmp_path: Path) -> None:
    lines = [
        json.dumps({"completions": [{"reward": 1.0}, {"reward": 1.0}]}, separators=(",", ":")),
        json.dumps({"completions": [{"reward": 0.0}, {"reward": 1.0}]}, separators=(",", ":")),
    ]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(line + "\n" for line in lines))
    tool = REPO / "qualification" / "tools" / "grpo_select.py"
    result = subprocess.run(
        [sys.executable, str(tool), "--input", str(source), "--output", str(target)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert target.read_text() == lines[1] + "\n"
    assert (
        'KILN_QUALIFICATION_METRIC {"name": "grpo.groups_kept", "unit": "count", "value": 1}'
        in (result.stdout.splitlines())
    )
    source.write_text(lines[0] + "\n")
    target.unlink()
    again = subprocess.run(
        [sys.executable, str(tool), "--input", str(source), "--output", str(target)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert again.returncode == 1
    assert "every group" in again.stderr
    assert not target.exists()
