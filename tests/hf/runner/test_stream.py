"""Parity of the reference runner's token-stream replay with the library's.

``train.py`` cannot import kiln-verify, so it carries its own copy of the token-stream rule
(docs/hf-contract.md, "The token stream of a trajectory"). These tests run both on the same
bundles: a valid multi-turn corpus passes both, and every tampering is refused by ``hf
verify`` with its code and by ``train.py --verify-only`` (exit 2) with the matching rule.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.core.digest import hash_file, sha256_bytes
from kiln_verify.errors import KilnError
from kiln_verify.hf.export import export_grpo
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.manifest import ExportManifest, document_bytes, read_export
from kiln_verify.hf.runner import train
from kiln_verify.hf.verify import verify_hf_path
from kiln_verify.testing.tiny_model import CHAT_TEMPLATE, THINKING_CHAT_TEMPLATE
from tests import models
from tests.hf.grpo_corpus import synthetic_groups, write_groups
from tests.tokens.stream_corpus import stream_groups
from tests.tokens.test_stream_replay import MUTATIONS

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

Groups = list[dict[str, Any]]

RULES = {
    "token_stream_environment_mismatch": "grpo-stream-environment",
    "token_stream_boundary_mismatch": "grpo-stream-boundary",
    "token_stream_environment_marked_action": "grpo-stream-environment-marked",
    "token_stream_forced_mismatch": "grpo-stream-forced",
    "token_stream_action_text_mismatch": "grpo-stream-action-text",
    "token_stream_unrenderable": "grpo-stream-unrenderable",
    "chat_template_not_prefix_preserving": "grpo-stream-template",
    "hf_grpo_prompt_replay_mismatch": "grpo-replay-prompt",
}
"""Library code -> train.py rule, one to one."""
RECORD_RULES = {
    "forced_outside_close": "grpo-forced-token",
    "overlapping_masks": "grpo-action-overlap",
}


def _rows(groups: Groups) -> bytes:
    return b"".join(
        json.dumps(g, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for g in groups
    )


def reseal_raw(bundle: Path, groups: Groups) -> None:
    """Replace train.jsonl (raw compact rows, valid or not) and reseal the manifest."""
    data = _rows(groups)
    (bundle / "train.jsonl").write_bytes(data)
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    found = hash_file(bundle / "train.jsonl", max_bytes=1 << 30)
    fields = export.to_json()
    fields.pop("export_sha256")
    fields["data"]["dataset"]["size_bytes"] = found.size_bytes
    fields["data"]["dataset"]["sha256"] = str(found.sha256)
    fields["data"]["row_count"] = len(groups)
    fields["data"]["ordered_corpus_sha256"] = train.grpo_corpus_digest(data.splitlines())
    (bundle / "kiln_hf_export.json").write_bytes(document_bytes(ExportManifest.create(**fields)))


def verify_only(bundle: Path, model: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    return subprocess.run(
        [sys.executable, "-I", str(bundle / "train.py"), str(bundle), "--base-model", str(model),
         "--verify-only"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory, THINKING_CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory, thinking_model: Path) -> tuple[Path, Groups]:
    out = tmp_path_factory.mktemp("stream")
    groups = stream_groups(thinking_model, 2, thinking=True, budget=2)
    outcome = export_grpo(
        ExportSource(model=thinking_model),
        dataset=write_groups(out / "g.jsonl", groups),
        name="s",
        output=out / "s.kiln-hf.tar.gz",
    )
    return outcome.directory, groups


def test_a_valid_multi_turn_bundle_passes_both(
    good: tuple[Path, Groups], thinking_model: Path
) -> None:
    assert verify_hf_path(good[0]).rows == 2
    run = verify_only(good[0], thinking_model)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["status"] == "verified"


@pytest.mark.parametrize(("label", "mutate", "code", "word"), MUTATIONS)
def test_each_tampering_is_refused_by_both(
    tmp_path: Path, good: tuple[Path, Groups], thinking_model: Path, label: str,
    mutate: Callable[[Groups], Groups], code: str, word: str,
) -> None:  # fmt: skip
    bundle = Path(shutil.copytree(good[0], tmp_path / "s.kiln-hf"))
    reseal_raw(bundle, mutate(good[1]))
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle)
    assert caught.value.code == code, label
    run = verify_only(bundle, thinking_model)
    assert run.returncode == 2, (label, run.stderr[-2000:])
    assert run.stdout == ""
    rule = RECORD_RULES[label] if code == "record_invalid" else RULES[code]
    assert run.stderr.startswith(f"kiln HF/TRL contract error: [{rule}] "), run.stderr[-600:]


def test_a_template_that_rewrites_history_is_refused_by_both(
    tmp_path: Path, tiny_model: Path, thinking_model: Path
) -> None:
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
    reseal_raw(bundle, groups)
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle)
    assert caught.value.code == "chat_template_not_prefix_preserving"
    run = verify_only(bundle, tiny_model)
    assert run.returncode == 2
    assert run.stderr.startswith("kiln HF/TRL contract error: [grpo-stream-template] ")


def test_the_rule_tables_are_one_to_one() -> None:
    from kiln_verify.errors import ERROR_CODES

    assert set(RULES) <= ERROR_CODES
    assert len(set(RULES.values())) == len(RULES)
    source = (Path(train.__file__)).read_text()
    for rule in [*RULES.values(), *RECORD_RULES.values()]:
        assert f'"{rule}"' in source, rule
