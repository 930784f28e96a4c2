"""GRPO token replay (§4.7): prompt ids, completion text and template flags, at export and
in ``hf verify`` (a bundle resealed around a tampered corpus, so only replay can object)."""

from __future__ import annotations

import copy
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.core.digest import hash_file
from kiln_verify.errors import KilnError
from kiln_verify.hf.export import export_grpo
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.manifest import (
    ExportManifest,
    GrpoGroup,
    document_bytes,
    grpo_corpus_sha256,
    read_export,
)
from kiln_verify.hf.verify import verify_hf_path
from tests.hf.grpo_corpus import synthetic_groups, write_groups

PROMPT = "hf_grpo_prompt_replay_mismatch"
COMPLETION = "hf_grpo_completion_replay_mismatch"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> tuple[Path, list[Any]]:
    """A pristine GRPO export of two groups (one thinking, with forced close tokens)."""
    out = tmp_path_factory.mktemp("grpo")
    groups = synthetic_groups(tiny_model, 2)
    corpus = write_groups(out / "groups.jsonl", groups)
    outcome = export_grpo(
        ExportSource(model=tiny_model),
        dataset=corpus,
        name="g",
        output=out / "g.kiln-hf.tar.gz",
    )
    return outcome.directory, groups


def _prompt_token(groups: list[Any]) -> list[Any]:
    out = copy.deepcopy(groups)
    ids = out[0]["completions"][1]["provenance"]["input_token_ids"]
    ids[1] = ids[1] + 1 if ids[1] + 1 < 384 else ids[1] - 1
    return out


def _completion_token(groups: list[Any]) -> list[Any]:
    """A sampled completion token changed consistently in the sequence and its action."""
    out = copy.deepcopy(groups)
    provenance = out[1]["completions"][0]["provenance"]
    action = provenance["action_tokens"][-2]
    assert action["source"] == "sampled"
    new = action["token_id"] + 1
    action["token_id"] = new
    provenance["input_token_ids"][action["sequence_index"]] = new
    return out


def _template_flag(groups: list[Any]) -> list[Any]:
    out = copy.deepcopy(groups)
    for completion in out[0]["completions"]:
        completion["provenance"]["template_invocation"]["template_kwargs"]["enable_thinking"] = True
    return out


def _trajectory(groups: list[Any], content: str | None = None) -> list[Any]:
    """One action segment: the completion's text (a valid one-action stream) or ``content``."""
    from kiln_verify.hf.digests import scored_payload_digest

    out = copy.deepcopy(groups)
    completion = out[0]["completions"][0]
    text = completion["text"] if content is None else content
    segments = [{"role": "assistant", "content": text, "kind": "action"}]
    completion["trajectory"] = segments
    completion["provenance"]["scored_payload_sha256"] = str(
        scored_payload_digest(completion["text"], segments)
    )
    # keep the key order of a canonical completion: text, reward, trajectory, provenance
    completion["provenance"] = completion.pop("provenance")
    return out


def _trajectory_one_character(groups: list[Any]) -> list[Any]:
    text = groups[0]["completions"][0]["text"]
    return _trajectory(groups, text[:-1] + ("X" if text[-1] != "X" else "Y"))


MUTATIONS = [
    ("prompt_token", _prompt_token, PROMPT, 1, 1),
    ("completion_token", _completion_token, COMPLETION, 2, 0),
    ("template_flag", _template_flag, PROMPT, 1, 0),
    ("trajectory_one_character", _trajectory_one_character,
     "token_stream_action_text_mismatch", 1, 0),
]


@pytest.mark.parametrize(("label", "mutate", "code", "line", "index"), MUTATIONS)
def test_export_refuses_unreplayable_corpus(
    tmp_path: Path, tiny_model: Path, good: tuple[Path, list[Any]], label: str,
    mutate: Any, code: str, line: int, index: int,
) -> None:
    corpus = write_groups(tmp_path / "c.jsonl", mutate(good[1]))
    with pytest.raises(KilnError) as caught:
        export_grpo(
            ExportSource(model=tiny_model),
            dataset=corpus,
            name="x",
            output=tmp_path / "x.kiln-hf.tar.gz",
        )
    assert caught.value.code == code, label
    assert caught.value.line == line
    assert f"completion {index}" in caught.value.rule
    assert sorted(os.listdir(tmp_path)) == ["c.jsonl"]


def _reseal(bundle: Path, groups: list[Any]) -> None:
    """Replace train.jsonl and reseal the manifest, as a forger with the bytes would."""
    write_groups(bundle / "train.jsonl", groups)
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    found = hash_file(bundle / "train.jsonl", max_bytes=1 << 30)
    fields = export.to_json()
    fields.pop("export_sha256")
    fields["data"]["dataset"]["size_bytes"] = found.size_bytes
    fields["data"]["dataset"]["sha256"] = str(found.sha256)
    fields["data"]["ordered_corpus_sha256"] = str(
        grpo_corpus_sha256(GrpoGroup.model_validate(g) for g in groups)
    )
    resealed = ExportManifest.create(**fields)
    (bundle / "kiln_hf_export.json").write_bytes(document_bytes(resealed))


@pytest.mark.parametrize(("label", "mutate", "code", "line", "index"), MUTATIONS)
def test_verify_refuses_resealed_unreplayable_corpus(
    tmp_path: Path, good: tuple[Path, list[Any]], label: str,
    mutate: Any, code: str, line: int, index: int,
) -> None:
    bundle = Path(shutil.copytree(good[0], tmp_path / "g.kiln-hf"))
    _reseal(bundle, good[1])  # the control: resealing the same corpus still verifies
    assert verify_hf_path(bundle).task == "grpo"
    _reseal(bundle, mutate(good[1]))
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle)
    assert caught.value.code == code, label
    assert caught.value.line == line
    assert caught.value.path == str(bundle / "train.jsonl")
    cli = CliRunner().invoke(app, ["hf", "verify", str(bundle)])
    assert cli.exit_code == 1
    assert code in cli.output


def test_a_one_action_trajectory_replays(tmp_path: Path, tiny_model: Path,
                                         good: tuple[Path, list[Any]]) -> None:
    """A trajectory holding exactly the decoded completion is a valid one-action stream."""
    corpus = write_groups(tmp_path / "c.jsonl", _trajectory(good[1]))
    outcome = export_grpo(
        ExportSource(model=tiny_model),
        dataset=corpus,
        name="t",
        output=tmp_path / "t.kiln-hf.tar.gz",
    )
    assert verify_hf_path(outcome.directory).task == "grpo"


@pytest.mark.parametrize("module", ["tokenizers", "transformers.utils.chat_template_utils"])
def test_verify_fails_closed_without_replay_packages(
    good: tuple[Path, list[Any]], monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    with pytest.raises(KilnError) as caught:
        verify_hf_path(good[0])
    assert caught.value.code == "hf_token_replay_unavailable"
