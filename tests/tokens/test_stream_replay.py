"""Multi-turn token streams (docs/hf-contract.md, "The token stream of a trajectory"): a
recorded trajectory corpus exports and verifies, and every kind of tampering is refused
with its own code, naming the group (line), completion and token position, at export and
in ``hf verify`` of a bundle resealed around the tampered corpus."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.errors import KilnError
from kiln_verify.hf.digests import scored_payload_digest
from kiln_verify.hf.export import export_grpo
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.verify import verify_hf_path
from kiln_verify.testing.tiny_model import CHAT_TEMPLATE, THINKING_CHAT_TEMPLATE
from tests import models
from tests.hf.export.test_grpo_replay import _reseal
from tests.hf.grpo_corpus import synthetic_groups, write_groups
from tests.tokens.stream_corpus import stream_groups

Groups = list[dict[str, Any]]


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory, THINKING_CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory, thinking_model: Path) -> tuple[Path, Groups]:
    out = tmp_path_factory.mktemp("stream")
    groups = stream_groups(thinking_model, 2, thinking=True, budget=2)
    corpus = write_groups(out / "groups.jsonl", groups)
    outcome = export_grpo(
        ExportSource(model=thinking_model),
        dataset=corpus,
        name="s",
        output=out / "s.kiln-hf.tar.gz",
    )
    return outcome.directory, groups


def _first(groups: Groups) -> tuple[Groups, dict[str, Any]]:
    out = copy.deepcopy(groups)
    return out, out[0]["completions"][0]


def _positions(completion: dict[str, Any]) -> tuple[set[int], int]:
    provenance = completion["provenance"]
    return {t["sequence_index"] for t in provenance["action_tokens"]}, provenance[
        "prompt_token_count"
    ]


def _env_after_first_action(completion: dict[str, Any]) -> list[int]:
    marked, start = _positions(completion)
    pos = start
    while pos in marked:
        pos += 1
    env = []
    while pos not in marked:
        env.append(pos)
        pos += 1
    return env


def tampered_env_token(groups: Groups) -> Groups:
    out, completion = _first(groups)
    position = _env_after_first_action(completion)[3]
    ids = completion["provenance"]["input_token_ids"]
    ids[position] = ids[position] + 1 if ids[position] + 1 < 384 else ids[position] - 1
    return out


def shifted_boundary(groups: Groups) -> Groups:
    """The first token of action 1 is no longer marked: the boundary moves by one."""
    out, completion = _first(groups)
    start = _env_after_first_action(completion)[-1] + 1
    actions = completion["provenance"]["action_tokens"]
    completion["provenance"]["action_tokens"] = [
        t for t in actions if t["sequence_index"] != start
    ]
    return out


def observation_marked_sampled(groups: Groups) -> Groups:
    out, completion = _first(groups)
    env = _env_after_first_action(completion)
    position = env[len(env) // 2]
    provenance = completion["provenance"]
    provenance["action_tokens"].append(
        {"sequence_index": position, "token_id": provenance["input_token_ids"][position],
         "source": "sampled", "behavior_logprob": -1.0}
    )  # fmt: skip
    provenance["action_tokens"].sort(key=lambda t: t["sequence_index"])
    return out


def sampled_marked_forced(groups: Groups) -> Groups:
    """A sampled reasoning token relabelled forced (its id added to the close tokens)."""
    out, completion = _first(groups)
    provenance = completion["provenance"]
    first = provenance["action_tokens"][0]
    assert first["source"] == "sampled"
    first["source"], first["behavior_logprob"] = "forced", None
    provenance["sampling"]["thinking_budget"]["close_token_ids"].append(first["token_id"])
    return out


def forced_outside_close(groups: Groups) -> Groups:
    out, completion = _first(groups)
    provenance = completion["provenance"]
    forced = next(t for t in provenance["action_tokens"] if t["source"] == "forced")
    new = next(i for i in range(3, 384) if i not in provenance["sampling"]["thinking_budget"][
        "close_token_ids"])  # fmt: skip
    forced["token_id"] = new
    provenance["input_token_ids"][forced["sequence_index"]] = new
    return out


def overlapping_masks(groups: Groups) -> Groups:
    """One position both sampled and forced."""
    out, completion = _first(groups)
    actions = completion["provenance"]["action_tokens"]
    forced = next(i for i, t in enumerate(actions) if t["source"] == "forced")
    actions.insert(forced, dict(actions[forced], source="sampled", behavior_logprob=-1.0))
    return out


def _retext(completion: dict[str, Any], index: int) -> None:
    segment = completion["trajectory"][index]
    content = segment["content"]
    segment["content"] = content[:-2] + ("X" if content[-2] != "X" else "Y") + content[-1]
    if "warning_prefix_len" in segment:
        segment["warning_prefix_len"] = len(segment["content"].encode("utf-8"))
    actions = [s["content"] for s in completion["trajectory"] if s["kind"] == "action"]
    completion["text"] = "<TURN_BREAK>".join(actions)
    completion["provenance"]["scored_payload_sha256"] = str(
        scored_payload_digest(completion["text"], completion["trajectory"])
    )


def observation_one_character(groups: Groups) -> Groups:
    out, completion = _first(groups)
    _retext(completion, 1)
    return out


def action_one_character(groups: Groups) -> Groups:
    out, completion = _first(groups)
    _retext(completion, 2)
    return out


def write_raw(path: Path, groups: Groups) -> Path:
    """Compact JSON rows (canonical for these groups), written without validating them."""
    path.write_bytes(b"".join(
        json.dumps(g, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        for g in groups))  # fmt: skip
    return path


MUTATIONS: list[tuple[str, Callable[[Groups], Groups], str, str]] = [
    ("tampered_env_token", tampered_env_token, "token_stream_environment_mismatch", "token"),
    ("shifted_boundary", shifted_boundary, "token_stream_boundary_mismatch", "token"),
    ("observation_marked_sampled", observation_marked_sampled,
     "token_stream_environment_marked_action", "token"),
    ("sampled_marked_forced", sampled_marked_forced, "token_stream_forced_mismatch", "action 0"),
    ("forced_outside_close", forced_outside_close, "record_invalid", "close"),
    ("overlapping_masks", overlapping_masks, "record_invalid", "strictly increase"),
    ("observation_one_character", observation_one_character,
     "token_stream_environment_mismatch", "token"),
    ("action_one_character", action_one_character, "token_stream_action_text_mismatch",
     "character"),
]  # fmt: skip
"""(label, tampering, code, a word the rule must contain); every tampering hits line 1."""


def test_good_corpus_exports_and_verifies(good: tuple[Path, Groups]) -> None:
    report = verify_hf_path(good[0])
    assert report.task == "grpo"
    assert report.rows == 2


def test_thinking_off_corpus_exports_and_verifies(tmp_path: Path, tiny_model: Path) -> None:
    """The plain ChatML template is prefix-preserving without thinking."""
    corpus = write_groups(tmp_path / "c.jsonl", stream_groups(tiny_model, 2, thinking=False))
    outcome = export_grpo(
        ExportSource(model=tiny_model),
        dataset=corpus,
        name="n",
        output=tmp_path / "n.kiln-hf.tar.gz",
    )
    assert verify_hf_path(outcome.directory).rows == 2


@pytest.mark.parametrize(("label", "mutate", "code", "word"), MUTATIONS)
def test_export_refuses_each_tampering_with_its_code(
    tmp_path: Path, thinking_model: Path, good: tuple[Path, Groups], label: str,
    mutate: Callable[[Groups], Groups], code: str, word: str,
) -> None:  # fmt: skip
    corpus = write_raw(tmp_path / "c.jsonl", mutate(good[1]))
    with pytest.raises(KilnError) as caught:
        export_grpo(
            ExportSource(model=thinking_model),
            dataset=corpus,
            name="x",
            output=tmp_path / "x.kiln-hf.tar.gz",
        )
    assert caught.value.code == code, (label, caught.value)
    assert caught.value.line == 1
    assert word in caught.value.rule
    if code != "record_invalid":
        assert "completion 0" in caught.value.rule


@pytest.mark.parametrize(("label", "mutate", "code", "word"),
                         [m for m in MUTATIONS if m[2] != "record_invalid"])  # fmt: skip
def test_verify_refuses_each_resealed_tampering(
    tmp_path: Path, good: tuple[Path, Groups], label: str,
    mutate: Callable[[Groups], Groups], code: str, word: str,
) -> None:  # fmt: skip
    bundle = Path(shutil.copytree(good[0], tmp_path / "s.kiln-hf"))
    _reseal(bundle, mutate(good[1]))
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle)
    assert caught.value.code == code, (label, caught.value)
    assert caught.value.line == 1
    assert "completion 0" in caught.value.rule
    assert word in caught.value.rule


def test_a_template_that_rewrites_history_is_refused(
    tmp_path: Path, tiny_model: Path, thinking_model: Path
) -> None:
    """The plain ChatML template drops the ``<think>`` opener from earlier assistant turns:
    the stream recorded under the prefix-preserving template cannot be its stream."""
    assert (tiny_model / "chat_template.jinja").read_text() == CHAT_TEMPLATE
    outcome = export_grpo(
        ExportSource(model=tiny_model),
        dataset=write_groups(tmp_path / "one.jsonl", synthetic_groups(tiny_model, 2)),
        name="p",
        output=tmp_path / "p.kiln-hf.tar.gz",
    )
    groups = stream_groups(thinking_model, 2, thinking=True, budget=2)
    digest = str(sha256_bytes((tiny_model / "chat_template.jinja").read_bytes()))
    for group in groups:
        for completion in group["completions"]:
            completion["provenance"]["tokenizer"]["chat_template_sha256"] = digest
    bundle = Path(shutil.copytree(outcome.directory, tmp_path / "q.kiln-hf"))
    _reseal(bundle, groups)
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle)
    assert caught.value.code == "chat_template_not_prefix_preserving"
    assert "completion 0 action 0" in caught.value.rule
    with pytest.raises(KilnError) as refused:
        export_grpo(
            ExportSource(model=tiny_model),
            dataset=write_groups(tmp_path / "m.jsonl", groups),
            name="m",
            output=tmp_path / "m.kiln-hf.tar.gz",
        )  # fmt: skip
    assert refused.value.code == "chat_template_not_prefix_preserving"
