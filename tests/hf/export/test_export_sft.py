"""`hf export-sft`: a bundle the verifier and the reference runner accept, made atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import (
    HfSftRowRejected,
    HfTrainingTemplateUnderivable,
    TargetExists,
    UsageError,
)
from kiln_verify.hf.digests import sft_parsed_row_digest, sft_raw_row_digest
from kiln_verify.hf.export import export_sft
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.export.template import has_generation_blocks
from kiln_verify.hf.manifest import read_export, read_sft_ingestion
from kiln_verify.hf.runner import environment_lock, reference_script
from kiln_verify.hf.verify import verify_hf_path

from .conftest import ROWS

PRISTINE = {
    "kiln_hf_export.json",
    "kiln_model_config.json",
    "tokenizer.json",
    "chat_template.jinja",
    "kiln_training_chat_template.jinja",
    "training_chat_template.jinja",
    "train.jsonl",
    "train.py",
    "requirements.lock",
    "sft_ingestion.json",
}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _runner(bundle: Path, model: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    return subprocess.run(
        [
            sys.executable,
            "-I",
            str(bundle / "train.py"),
            str(bundle),
            "--base-model",
            str(model),
            "--verify-only",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_export_verify_and_runner_accept(
    tmp_path: Path, tiny_model: Path, sft_file: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    archive = out / "run_01.kiln-hf.tar.gz"
    cli = CliRunner()
    made = cli.invoke(
        app,
        [
            "hf",
            "export-sft",
            "--model",
            str(tiny_model),
            "--file",
            str(sft_file),
            "--name",
            "run_01",
            "--output",
            str(archive),
            "--json",
        ],
    )
    assert made.exit_code == 0, made.output
    report = json.loads(made.output)
    bundle = out / "run_01.kiln-hf"
    assert report["directory"] == str(bundle)
    assert report["archive"] == str(archive)
    assert _files(bundle) == PRISTINE
    assert sorted(os.listdir(out)) == ["run_01.kiln-hf", "run_01.kiln-hf.tar.gz"]  # no residue

    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    assert report["export_sha256"] == export.export_sha256
    assert (bundle / "train.py").read_bytes() == reference_script().data
    assert (bundle / "requirements.lock").read_bytes() == environment_lock().data
    assert (bundle / "tokenizer.json").read_bytes() == (tiny_model / "tokenizer.json").read_bytes()
    assert (bundle / "chat_template.jinja").read_bytes() == (
        tiny_model / "chat_template.jinja"
    ).read_bytes()
    assert has_generation_blocks((bundle / "training_chat_template.jinja").read_text())
    native = (bundle / "kiln_training_chat_template.jinja").read_text()
    assert not has_generation_blocks(native)
    assert export.model.native_training_chat_template.sha256 != (
        export.model.trl_training_chat_template.sha256
    )
    shards = export.model.base_weight_shard_manifest.shards
    assert [s.filename for s in shards] == ["model.safetensors"]
    assert shards[0].size_bytes == (tiny_model / "model.safetensors").stat().st_size
    config = loads_object((bundle / "kiln_model_config.json").read_bytes(), max_bytes=1 << 20)
    assert config == json.loads((tiny_model / "config.json").read_text())

    rows = (bundle / "train.jsonl").read_bytes().splitlines()
    assert [json.loads(r) for r in rows] == ROWS
    receipt = read_sft_ingestion((bundle / "sft_ingestion.json").read_bytes())
    assert receipt.kept_row_hashes == [str(sft_parsed_row_digest(r)) for r in ROWS]
    assert receipt.source == "dataset_path"
    assert receipt.source_locator == str(sft_file)

    for target in (bundle, archive):
        checked = cli.invoke(app, ["hf", "verify", str(target), "--json"])
        assert checked.exit_code == 0, checked.output
        assert json.loads(checked.output)["export_sha256"] == export.export_sha256

    run = _runner(bundle, tiny_model)
    assert run.returncode == 0, run.stderr
    status = json.loads(run.stdout)
    assert status["status"] == "verified"
    assert status["export_sha256"] == export.export_sha256
    assert status["reference_script_match"] is True
    assert status["rows"] == 2


def test_archive_is_deterministic(tmp_path: Path, tiny_model: Path, sft_file: Path) -> None:
    made = []
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        outcome = export_sft(
            ExportSource(model=tiny_model),
            dataset=sft_file,
            name="same",
            output=tmp_path / where / "same.kiln-hf.tar.gz",
        )
        made.append(outcome)
    assert made[0].archive.read_bytes() == made[1].archive.read_bytes()
    assert made[0].report.export_sha256 == made[1].report.export_sha256


def test_existing_targets_are_never_replaced(
    tmp_path: Path, tiny_model: Path, sft_file: Path
) -> None:
    archive = tmp_path / "n.kiln-hf.tar.gz"
    export_sft(ExportSource(model=tiny_model), dataset=sft_file, name="n", output=archive)
    before = archive.read_bytes()
    with pytest.raises(TargetExists):
        export_sft(ExportSource(model=tiny_model), dataset=sft_file, name="n", output=archive)
    assert archive.read_bytes() == before
    # the directory alone also blocks an export
    archive.unlink()
    with pytest.raises(TargetExists):
        export_sft(ExportSource(model=tiny_model), dataset=sft_file, name="n", output=archive)
    assert not archive.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


@pytest.mark.parametrize(
    ("name", "output"),
    [("bad name", "bad name.kiln-hf.tar.gz"), ("-x", "-x.kiln-hf.tar.gz"), ("ok", "other.tar.gz")],
)
def test_name_and_output_are_checked_first(
    tmp_path: Path, tiny_model: Path, sft_file: Path, name: str, output: str
) -> None:
    with pytest.raises(UsageError):
        export_sft(
            ExportSource(model=tiny_model),
            dataset=sft_file,
            name=name,
            output=tmp_path / output,
        )
    assert os.listdir(tmp_path) == [sft_file.name]


BAD_ROWS = [
    ("invalid_json", b'{"messages": [\n'),
    ("empty_messages", b'{"messages": []}\n'),
    ("invalid_role", b'{"messages": [{"role": "robot", "content": "x"}]}\n'),
    ("tokenization_error", b'{"messages": [{"role": "user", "content": "no reply"}]}\n'),
    ("invalid_json", b'{"messages": [{"role": "user"}]}\n'),
]


@pytest.mark.parametrize(("reason", "line"), BAD_ROWS)
def test_fail_policy_stops_at_the_first_bad_row(
    tmp_path: Path, tiny_model: Path, reason: str, line: bytes
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_bytes(json.dumps(ROWS[0]).encode() + b"\n\n" + line)
    with pytest.raises(HfSftRowRejected) as caught:
        export_sft(
            ExportSource(model=tiny_model),
            dataset=data,
            name="f",
            output=tmp_path / "f.kiln-hf.tar.gz",
        )
    assert caught.value.line == 2  # blank lines are not rows
    assert reason in caught.value.rule
    assert sorted(os.listdir(tmp_path)) == ["d.jsonl"]


def test_skip_policy_records_every_rejected_row(tmp_path: Path, tiny_model: Path) -> None:
    lines = [json.dumps(ROWS[0]).encode() + b"\n"]
    for _, line in BAD_ROWS:
        lines += [b"   \n", line]
    lines.append(json.dumps(ROWS[1]).encode() + b"\n")
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"".join(lines))
    outcome = export_sft(
        ExportSource(model=tiny_model),
        dataset=data,
        name="s",
        output=tmp_path / "s.kiln-hf.tar.gz",
        invalid_row_policy="skip",
    )
    receipt = read_sft_ingestion((outcome.directory / "sft_ingestion.json").read_bytes())
    assert (receipt.rows_read, receipt.rows_kept, receipt.rows_rejected) == (7, 2, 5)
    assert [r.row_index for r in receipt.rejected_rows] == [2, 3, 4, 5, 6]
    assert [r.reason for r in receipt.rejected_rows] == [reason for reason, _ in BAD_ROWS]
    assert receipt.rejected_rows[0].row_sha256 == str(sft_raw_row_digest(BAD_ROWS[0][1]))
    assert receipt.rejected_rows[1].row_sha256 == str(sft_parsed_row_digest({"messages": []}))
    export = read_export((outcome.directory / "kiln_hf_export.json").read_bytes())
    assert export.data.sft_selection is not None
    assert export.data.sft_selection.invalid_row_policy == "skip"
    assert export.data.row_count == 2
    assert verify_hf_path(outcome.archive).rows == 2
    run = _runner(outcome.directory, tiny_model)
    assert run.returncode == 0, run.stderr


def test_no_kept_row_is_an_error(tmp_path: Path, tiny_model: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_bytes(BAD_ROWS[1][1])
    with pytest.raises(HfSftRowRejected, match="no row was kept"):
        export_sft(
            ExportSource(model=tiny_model),
            dataset=data,
            name="z",
            output=tmp_path / "z.kiln-hf.tar.gz",
            invalid_row_policy="skip",
        )


def test_underivable_template_names_the_flag(
    tmp_path: Path, model_dir: Path, sft_file: Path
) -> None:
    (model_dir / "chat_template.jinja").write_text(
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    )
    with pytest.raises(HfTrainingTemplateUnderivable) as caught:
        export_sft(
            ExportSource(model=model_dir),
            dataset=sft_file,
            name="t",
            output=tmp_path / "t.kiln-hf.tar.gz",
        )
    assert "--training-template" in str(caught.value)

    cli = CliRunner().invoke(
        app,
        [
            "hf",
            "export-sft",
            "--model",
            str(model_dir),
            "--file",
            str(sft_file),
            "--name",
            "t",
            "--output",
            str(tmp_path / "t.kiln-hf.tar.gz"),
        ],
    )
    assert cli.exit_code == 1
    assert "hf_training_template_underivable" in cli.output

    training = tmp_path / "train.jinja"
    training.write_text(
        "{% for m in messages %}[{{ m['role'] }}] {% if m['role'] == 'assistant' %}"
        "{% generation %}{{ m['content'] }}{% endgeneration %}{% else %}{{ m['content'] }}"
        "{% endif %}{{ '\\n' }}{% endfor %}"
    )
    outcome = export_sft(
        ExportSource(model=model_dir, training_template=training),
        dataset=sft_file,
        name="t",
        output=tmp_path / "t.kiln-hf.tar.gz",
    )
    assert (
        outcome.directory / "training_chat_template.jinja"
    ).read_bytes() == training.read_bytes()


def test_training_template_must_mark_assistant_replies(
    tmp_path: Path, tiny_model: Path, sft_file: Path
) -> None:
    plain = tmp_path / "plain.jinja"
    plain.write_text((tiny_model / "chat_template.jinja").read_text())
    with pytest.raises(HfTrainingTemplateUnderivable, match="generation"):
        export_sft(
            ExportSource(model=tiny_model, training_template=plain),
            dataset=sft_file,
            name="p",
            output=tmp_path / "p.kiln-hf.tar.gz",
        )


def test_split_manifest_and_input_adapter_are_bound(
    tmp_path: Path, tiny_model: Path, sft_file: Path
) -> None:
    split = tmp_path / "split.json"
    split.write_text('{"eval": [1]}')
    adapter = tmp_path / "support-base"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 2}')
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    outcome = export_sft(
        ExportSource(model=tiny_model, input_adapter=adapter, split_manifest=split),
        dataset=sft_file,
        name="o",
        output=tmp_path / "o.kiln-hf.tar.gz",
    )
    export = read_export((outcome.directory / "kiln_hf_export.json").read_bytes())
    assert export.data.split_manifest is not None
    assert export.input_adapter is not None
    assert export.input_adapter.name == "support-base"
    assert export.input_adapter.kiln_manifest is None
    assert _files(outcome.directory) == PRISTINE | {
        "split_manifest.json",
        "input_adapter/adapter_config.json",
        "input_adapter/adapter_model.safetensors",
    }
    assert verify_hf_path(outcome.archive).files == 13


def test_split_manifest_must_be_an_object(tmp_path: Path, tiny_model: Path, sft_file: Path) -> None:
    split = tmp_path / "split.json"
    split.write_text("[1]")
    with pytest.raises(UsageError):
        export_sft(
            ExportSource(model=tiny_model, split_manifest=split),
            dataset=sft_file,
            name="o",
            output=tmp_path / "o.kiln-hf.tar.gz",
        )
