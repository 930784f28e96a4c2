"""``openenv rollout --grpo-output``: the GRPO corpus a real rollout writes, end to end.

A rollout of the transformers policy on the tiny model against the embedded oracle writes
the corpus; ``hf export-grpo`` must accept it byte for byte and ``hf verify`` must pass
(including the token replay of every prompt and completion). Refusals come before any
network contact where the flags already decide them, and never leave a file behind.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from kiln_verify.cli import app
from kiln_verify.errors import KilnError
from kiln_verify.hf.manifest import GrpoGroup, grpo_row_bytes
from kiln_verify.openenv.collect import CollectionControls, run_collection
from kiln_verify.openenv.policy.base import PolicyRequest, PolicyResponse, TokenizerBound
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.records.rollout import iter_rollout_lines
from kiln_verify.testing.lora import build_lora_adapter
from oracle.runner import ServerHandle
from tests import models
from tests.openenv.collect.conftest import files_in, outputs
from tests.openenv.collect.options import make_controls


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


def _rollout(out: Path, model: Path, *extra: str) -> Any:
    args = ["openenv", "rollout", "--policy", "transformers"]
    args += ["--policy-option", f"model_dir={model}", "--groups", "2", "--group-size", "2"]
    args += ["--max-steps", "1", "--max-action-tokens", "12", "--temperature", "1.0"]
    args += ["--output", str(out / "d.jsonl"), "--replay-output", str(out / "r.json")]
    args += ["--summary-output", str(out / "s.json"), "--json", *extra]
    return CliRunner().invoke(app, args)


def _export(model: Path, corpus: Path, out: Path, *extra: str) -> Any:
    args = ["hf", "export-grpo", "--model", str(model), "--file", str(corpus)]
    args += ["--name", "g", "--output", str(out / "g.kiln-hf.tar.gz"), "--json", *extra]
    return CliRunner().invoke(app, args)


def _rows(path: Path) -> list[GrpoGroup]:
    return [GrpoGroup.model_validate(json.loads(line)) for line in path.read_bytes().splitlines()]


def test_rollout_corpus_exports_and_verifies(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    made = _rollout(out, tiny_model, "--grpo-output", str(out / "grpo.jsonl"))
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["grpo"] == str(out / "grpo.jsonl")
    assert files_in(out) == ["d.jsonl", "grpo.jsonl", "r.json", "s.json"]
    corpus = (out / "grpo.jsonl").read_bytes()
    rows = _rows(out / "grpo.jsonl")
    assert b"".join(grpo_row_bytes(row) for row in rows) == corpus  # canonical, final LF
    with open(out / "d.jsonl", "rb") as stream:
        lines = [line.group for line in iter_rollout_lines(stream)]
    assert len(rows) == len(lines) == 2
    for row, line in zip(rows, lines, strict=True):
        assert row.messages == line.messages
        assert [c.reward for c in row.completions] == [c.reward for c in line.completions]
        for completion, rollout in zip(row.completions, line.completions, strict=True):
            assert completion.trajectory is None
            assert completion.provenance.behavior_policy == rollout.openenv.behavior_policy
            assert completion.provenance.template_invocation is not None
    seeds = [c.provenance.seed for row in rows for c in row.completions]
    assert len(set(seeds)) == 4  # generation seed per (group seed, candidate)

    exported = _export(tiny_model, out / "grpo.jsonl", tmp_path)
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "g.kiln-hf" / "train.jsonl").read_bytes() == corpus
    verified = CliRunner().invoke(app, ["hf", "verify", str(tmp_path / "g.kiln-hf.tar.gz")])
    assert verified.exit_code == 0, verified.output

    again = tmp_path / "again"
    again.mkdir()
    repeat = _rollout(again, tiny_model, "--grpo-output", str(again / "grpo.jsonl"))
    assert repeat.exit_code == 0, repeat.output
    assert (again / "grpo.jsonl").read_bytes() == corpus  # same seeds, same bytes
    other = tmp_path / "other"
    other.mkdir()
    shifted = _rollout(
        other, tiny_model, "--grpo-output", str(other / "grpo.jsonl"), "--seed-start", "9"
    )
    assert shifted.exit_code == 0, shifted.output
    assert (other / "grpo.jsonl").read_bytes() != corpus


def test_adapter_policy_corpus_exports_with_its_input_adapter(
    tiny_model: Path, tmp_path: Path
) -> None:
    adapter = build_lora_adapter(tiny_model, tmp_path / "lora-a")
    out = tmp_path / "run"
    out.mkdir()
    made = _rollout(
        out,
        tiny_model,
        "--grpo-output",
        str(out / "grpo.jsonl"),
        "--policy-option",
        f"adapter_dir={adapter}",
    )
    assert made.exit_code == 0, made.output
    policy = _rows(out / "grpo.jsonl")[0].completions[0].provenance.behavior_policy
    assert policy.adapter is not None
    assert policy.adapter.name == "lora-a"
    without = _export(tiny_model, out / "grpo.jsonl", tmp_path)
    assert without.exit_code == 1
    assert "hf_grpo_corpus_invalid" in without.output
    exported = _export(tiny_model, out / "grpo.jsonl", tmp_path, "--input-adapter", str(adapter))
    assert exported.exit_code == 0, exported.output


@pytest.mark.parametrize(
    ("flags", "code"),
    [
        (["--group-size", "1"], "grpo_output_unsupported"),
        (["--temperature", "0.123456789"], "grpo_output_unsupported"),
    ],
)
def test_flag_refusals_leave_nothing(
    tmp_path: Path, tiny_model: Path, flags: list[str], code: str
) -> None:
    # The flag comes last, so it overrides the helper's own value.
    result = _rollout(tmp_path, tiny_model, "--grpo-output", str(tmp_path / "g.jsonl"), *flags)
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]  # --json: the error object on stdout
    assert error["code"] == code
    assert error["rule"].startswith("--grpo-output ")
    assert files_in(tmp_path) == []


def test_random_policy_is_refused(tmp_path: Path) -> None:
    args = ["openenv", "rollout", "--policy", "random", "--max-steps", "1", "--group-size", "2"]
    args += ["--grpo-output", str(tmp_path / "g.jsonl"), "--output", str(tmp_path / "d.jsonl")]
    args += ["--replay-output", str(tmp_path / "r.json"), "--summary-output"]
    args += [str(tmp_path / "s.json"), "--oracle", "no-such-oracle"]
    result = CliRunner().invoke(app, args)
    # The refusal comes before the (here unstartable) embedded oracle is started.
    assert result.exit_code == 2, result.output
    assert result.output.startswith(
        "error: policy_provenance_missing: --grpo-output needs a policy that records exact "
        "token provenance from one tokenizer; RandomPolicy does not"
    )
    assert files_in(tmp_path) == []


def _controls(tmp_path: Path, url: str, **options: Any) -> CollectionControls:
    options = {"groups": 1, "group_size": 2, "max_steps": 1, **outputs(tmp_path), **options}
    return make_controls([url], grpo_output=str(tmp_path / "g.jsonl"), **options)


def test_policy_without_provenance_is_refused_before_network(tmp_path: Path) -> None:
    # Port 9 on loopback: any network contact would fail with a transport error instead.
    controls = _controls(tmp_path, "http://127.0.0.1:9")
    with pytest.raises(KilnError) as caught:
        asyncio.run(run_collection(controls, RandomPolicy()))
    assert caught.value.code == "policy_provenance_missing"
    assert files_in(tmp_path) == []


class _Unrecorded(RandomPolicy):
    """Claims a tokenizer but answers without provenance (a broken TokenizerBound)."""

    def tokenizer_identity(self) -> dict[str, str]:
        return {}

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        return await super().act(request)


def test_response_without_provenance_publishes_nothing(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    policy = _Unrecorded()
    assert isinstance(policy, TokenizerBound)
    controls = _controls(tmp_path, servers["bandit"].base_url)
    with pytest.raises(KilnError) as caught:
        asyncio.run(run_collection(controls, policy))
    assert caught.value.code == "policy_provenance_missing"
    assert "group 0 candidate" in str(caught.value)
    assert files_in(tmp_path) == []


def test_grpo_output_no_clobber_and_force(tiny_model: Path, tmp_path: Path) -> None:
    (tmp_path / "grpo.jsonl").write_bytes(b"keep\n")
    refused = _rollout(tmp_path, tiny_model, "--grpo-output", str(tmp_path / "grpo.jsonl"))
    assert refused.exit_code == 1
    assert "target_exists" in refused.output
    assert files_in(tmp_path) == ["grpo.jsonl"]
    assert (tmp_path / "grpo.jsonl").read_bytes() == b"keep\n"
    forced = _rollout(
        tmp_path, tiny_model, "--grpo-output", str(tmp_path / "grpo.jsonl"), "--force"
    )
    assert forced.exit_code == 0, forced.output
    assert files_in(tmp_path) == ["d.jsonl", "grpo.jsonl", "r.json", "s.json"]
    assert len(_rows(tmp_path / "grpo.jsonl")) == 2


def test_same_path_as_a_bundle_file_is_a_usage_error(tiny_model: Path, tmp_path: Path) -> None:
    result = _rollout(tmp_path, tiny_model, "--grpo-output", str(tmp_path / "d.jsonl"))
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == {
        "code": "usage",
        "rule": "--grpo-output must differ from the three bundle files",
    }
    assert files_in(tmp_path) == []


def test_retained_provenance_is_charged_to_the_budget(
    servers: dict[str, ServerHandle], tiny_model: Path, tmp_path: Path
) -> None:
    from kiln_verify.openenv.collect import RetainedBudget, collect
    from kiln_verify.openenv.policy.base import ZERO_CLOCK
    from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(tiny_model, clock=ZERO_CLOCK)
    url = servers["bandit"].base_url
    plain_budget, grpo_budget = RetainedBudget(), RetainedBudget()
    options: dict[str, Any] = {"groups": 1, "group_size": 2, "max_steps": 1, **outputs(tmp_path)}
    plain_controls = make_controls([url], max_action_tokens=8, **options)
    plain = asyncio.run(collect(plain_controls, policy, budget=plain_budget))
    assert all(e.generations == () for g in plain.groups for e in g.episodes)  # dropped
    grpo = asyncio.run(
        collect(_controls(tmp_path, url, max_action_tokens=8), policy, budget=grpo_budget)
    )
    generations = [e.generations for g in grpo.groups for e in g.episodes]
    assert [len(kept) for kept in generations] == [1, 1]
    sizer = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    expected = 0
    for (kept,) in generations:
        token = kept.provenance
        for value in (
            list(token.prompt_token_ids),
            list(token.completion_token_ids),
            list(token.behavior_logprobs),
            kept.text,
        ):
            expected += len(sizer.encode(value).encode("utf-8"))
    assert grpo_budget.used - plain_budget.used == expected
    exact = RetainedBudget(plain_budget.used + expected)  # the last accepted bound
    asyncio.run(collect(_controls(tmp_path, url, max_action_tokens=8), policy, budget=exact))
    assert exact.used == exact.bound
    tight = RetainedBudget(plain_budget.used + expected - 1)  # the first refused one
    with pytest.raises(KilnError) as caught:
        asyncio.run(collect(_controls(tmp_path, url, max_action_tokens=8), policy, budget=tight))
    assert caught.value.code == "limit_exceeded"
    assert "MAX_RETAINED_BYTES" in str(caught.value)
