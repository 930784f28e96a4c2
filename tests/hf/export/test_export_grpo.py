"""`hf export-grpo`: a canonical recorded-GRPO corpus bound to the exported model."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import dumps_compact
from kiln_verify.errors import HfGrpoCorpusInvalid, KilnError
from kiln_verify.hf.export import export_grpo
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.manifest import GrpoGroup, grpo_corpus_sha256, grpo_row_bytes, read_export
from kiln_verify.hf.verify import verify_hf_path
from tests.hf.grpo_corpus import synthetic_groups, write_groups


def _groups(model: Path, count: int = 2) -> list[dict[str, Any]]:
    return synthetic_groups(model, count)


def _write(path: Path, groups: list[dict[str, Any]]) -> Path:
    return write_groups(path, groups)


def test_export_grpo_round_trip(tmp_path: Path, tiny_model: Path) -> None:
    groups = _groups(tiny_model)
    corpus = _write(tmp_path / "groups.jsonl", groups)
    archive = tmp_path / "g.kiln-hf.tar.gz"
    made = CliRunner().invoke(
        app,
        [
            "hf",
            "export-grpo",
            "--model",
            str(tiny_model),
            "--file",
            str(corpus),
            "--name",
            "g",
            "--output",
            str(archive),
            "--json",
        ],
    )
    assert made.exit_code == 0, made.output
    bundle = tmp_path / "g.kiln-hf"
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    assert export.task == "grpo"
    assert export.data.row_count == 2
    assert export.data.ordered_corpus_sha256 == str(
        grpo_corpus_sha256(GrpoGroup.model_validate(g) for g in groups)
    )
    assert (bundle / "train.jsonl").read_bytes() == corpus.read_bytes()
    assert not (bundle / "sft_ingestion.json").exists()
    assert verify_hf_path(archive).task == "grpo"
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    run = subprocess.run(
        [
            sys.executable,
            "-I",
            str(bundle / "train.py"),
            str(bundle),
            "--base-model",
            str(tiny_model),
            "--verify-only",
            "--batch-size",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["task"] == "grpo"


def _refused(
    tmp_path: Path, model: Path, groups: list[dict[str, Any]], raw: bytes | None = None
) -> KilnError:
    corpus = tmp_path / "c.jsonl"
    if raw is None:
        _write(corpus, groups)
    else:
        corpus.write_bytes(raw)
    with pytest.raises(KilnError) as caught:
        export_grpo(
            ExportSource(model=model),
            dataset=corpus,
            name="x",
            output=tmp_path / "x.kiln-hf.tar.gz",
        )
    assert sorted(os.listdir(tmp_path)) == ["c.jsonl"]  # nothing written
    return caught.value


def test_noncanonical_rows_are_never_normalized(tmp_path: Path, tiny_model: Path) -> None:
    groups = _groups(tiny_model)
    good = b"".join(grpo_row_bytes(GrpoGroup.model_validate(g)) for g in groups)
    spaced = json.dumps(groups[0]).encode() + b"\n"
    assert _refused(tmp_path, tiny_model, groups, spaced).code == "hf_grpo_corpus_invalid"
    assert _refused(tmp_path, tiny_model, groups, good[:-1]).code == "hf_grpo_corpus_invalid"
    blank = good + b"\n"
    assert _refused(tmp_path, tiny_model, groups, blank).code in {
        "hf_grpo_corpus_invalid",
        "json_syntax",
    }


def test_corpus_rules(tmp_path: Path, tiny_model: Path) -> None:
    groups = _groups(tiny_model)
    wide = copy.deepcopy(groups)
    wide[1]["completions"].append(copy.deepcopy(wide[1]["completions"][0]))
    assert "width" in _refused(tmp_path, tiny_model, wide).rule

    mixed = copy.deepcopy(groups)
    for c in mixed[1]["completions"]:
        c["provenance"]["behavior_policy"]["implementation"] = "other"
    assert "behaviour-policy" in _refused(tmp_path, tiny_model, mixed).rule

    served = copy.deepcopy(groups)
    for g in served:
        for c in g["completions"]:
            c["provenance"]["behavior_policy"]["served_model_id"] = "someone/else"
    error = _refused(tmp_path, tiny_model, served)
    assert isinstance(error, HfGrpoCorpusInvalid)
    assert "served_model_id" in error.rule

    tokenizer = copy.deepcopy(groups)
    for g in tokenizer:
        for c in g["completions"]:
            c["provenance"]["tokenizer"]["chat_template_sha256"] = str(sha256_bytes(b"x"))
    assert "tokenizer" in _refused(tmp_path, tiny_model, tokenizer).rule

    adapter = copy.deepcopy(groups)
    for g in adapter:
        for c in g["completions"]:
            c["provenance"]["behavior_policy"]["adapter"] = {
                "name": "a",
                "content_sha256": str(sha256_bytes(b"a")),
            }
    assert "adapter" in _refused(tmp_path, tiny_model, adapter).rule

    single = copy.deepcopy(groups)
    for g in single:
        g["completions"] = g["completions"][:1]
    raw = b"".join(dumps_compact(g) + b"\n" for g in single)
    assert _refused(tmp_path, tiny_model, single, raw).code == "record_invalid"
