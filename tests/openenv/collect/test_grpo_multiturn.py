"""``rollout --grpo-output`` of multi-step episodes: one token stream per episode.

The tiny model (prefix-preserving thinking template) is warm-started on maze actions so
that episodes take several steps, some with a recoverable protocol error (a move out of
range) and some ending as ``invalid_model_action``. Each GRPO completion must carry the
OpenEnv completion's text, trajectory and reward exactly, its stream must export and
verify, a thinking budget's close tokens must be ``forced``, and a template that rewrites
earlier turns must be refused during collection, before anything is published.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from kiln_verify.cli import app
from kiln_verify.hf.manifest import GrpoGroup
from kiln_verify.openenv.records.rollout import iter_rollout_lines
from kiln_verify.testing.tiny_model import (
    CHAT_TEMPLATE,
    THINKING_CHAT_TEMPLATE,
    build_tiny_model,
    warm_start,
)
from tests.openenv.collect.conftest import files_in


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--json"])


def files(out: Path, stem: str = "t") -> list[str]:
    return ["--output", str(out / f"{stem}.jsonl"), "--replay-output", str(out / f"{stem}.r.json"),
            "--summary-output", str(out / f"{stem}.s.json")]  # fmt: skip


@pytest.fixture(scope="module")
def maze_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("maze-model")
    model = build_tiny_model(root / "model", THINKING_CHAT_TEMPLATE)
    made = invoke("openenv", "rollout", "--oracle", "maze", "--policy", "random", "--groups", "8",
                  "--group-size", "2", "--max-steps", "1", "--no-thinking", "--seed-start",
                  "1000", *files(root, "boot"))  # fmt: skip
    assert made.exit_code == 0, made.output
    warm_start(model, root / "boot.jsonl", 40, thinking=True)
    return model


def rollout(model: Path, out: Path, *extra: str) -> Any:
    return invoke("openenv", "rollout", "--oracle", "maze", "--policy", "transformers",
                  "--policy-option", f"model_dir={model}", "--groups", "2", "--group-size", "2",
                  "--max-steps", "3", "--max-action-tokens", "16", "--concurrency", "1",
                  *files(out), "--grpo-output", str(out / "g.jsonl"), *extra)  # fmt: skip


THINKING = [["--no-thinking"], ["--thinking", "--thinking-budget-tokens", "3"]]


@pytest.mark.parametrize("thinking", THINKING)
def test_multi_step_corpus_is_the_openenv_corpus_with_one_stream(
    maze_model: Path, tmp_path: Path, thinking: list[str]
) -> None:
    made = rollout(maze_model, tmp_path, *thinking)
    assert made.exit_code == 0, made.output
    corpus = (tmp_path / "g.jsonl").read_bytes().splitlines()
    rows = [GrpoGroup.model_validate(json.loads(line)) for line in corpus]
    with open(tmp_path / "t.jsonl", "rb") as stream:
        lines = [line.group for line in iter_rollout_lines(stream)]
    steps = []
    for row, line in zip(rows, lines, strict=True):
        assert row.messages == line.messages
        for completion, episode in zip(row.completions, line.completions, strict=True):
            assert completion.text == episode.text
            assert completion.reward == episode.reward
            assert completion.trajectory == episode.trajectory
            provenance = completion.provenance
            actions = [s for s in episode.trajectory if s.kind == "action"]
            steps.append(len(actions))
            sources = [t.source for t in provenance.action_tokens]
            if len(thinking) > 1:
                budget = provenance.sampling.thinking_budget
                assert budget is not None
                assert budget.max_tokens == 3
                assert sources.count("forced") == len(budget.close_token_ids) * len(actions)
            else:
                assert "forced" not in sources
            # environment tokens lie between the actions: fewer action tokens than positions
            assert len(provenance.action_tokens) < len(provenance.input_token_ids) - (
                provenance.prompt_token_count
            ) or len(actions) == 1
    assert max(steps) >= 2
    exported = invoke("hf", "export-grpo", "--model", str(maze_model), "--file",
                      str(tmp_path / "g.jsonl"), "--name", "m", "--output",
                      str(tmp_path / "m.kiln-hf.tar.gz"))  # fmt: skip
    assert exported.exit_code == 0, exported.output
    assert invoke("hf", "verify", str(tmp_path / "m.kiln-hf")).exit_code == 0
    again = tmp_path / "again"
    again.mkdir()
    assert rollout(maze_model, again, *thinking).exit_code == 0
    assert (again / "g.jsonl").read_bytes() == (tmp_path / "g.jsonl").read_bytes()


def test_a_template_that_rewrites_history_is_refused_while_collecting(
    maze_model: Path, tmp_path: Path
) -> None:
    plain = Path(shutil.copytree(maze_model, tmp_path / "plain"))
    (plain / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    out = tmp_path / "out"
    out.mkdir()
    refused = rollout(plain, out, "--thinking", "--thinking-budget-tokens", "3",
                      "--groups", "4")  # fmt: skip
    assert refused.exit_code == 1, refused.output
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "chat_template_not_prefix_preserving"
    assert "step 1" in error["rule"]
    assert files_in(out) == []
