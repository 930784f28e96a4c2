"""The reference runner's standard-library preflight, run as a subprocess (`python -I`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kiln_verify.hf.runner import reference_script
from kiln_verify.hf.runner.train import PINNED_PACKAGES

from .conftest import Run, Runner
from .kit import fake_site, fake_tokenizer, make_bundle, seal, write_manifest

ML_MODULES = {"torch", "transformers", "trl", "peft", "datasets", "accelerate", "safetensors"}


def _violation(run: Run, rule: str) -> None:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert run.stdout == ""
    assert "kiln HF/TRL contract error:" in run.stderr
    assert f"[{rule}]" in run.stderr, run.stderr
    assert "fix:" in run.stderr


def test_verify_only_in_the_real_environment(bundle: Path, run_runner: Runner) -> None:
    run = run_runner(bundle, "--verify-only")
    assert run.returncode == 0, run.stderr
    manifest = json.loads((bundle / "kiln_hf_export.json").read_text())
    assert run.status == {
        "export_sha256": manifest["export_sha256"],
        "reference_script_match": True,
        "rows": 2,
        "status": "verified",
        "task": "sft",
        "torch_version": run.status["torch_version"],
    }
    assert run.status["torch_version"].split("+")[0] == PINNED_PACKAGES["torch"]
    assert not (run.imported & ML_MODULES), run.imported & ML_MODULES
    assert "json" in run.imported  # the importtime probe works


def test_verify_only_with_fake_pinned_metadata_imports_nothing(
    bundle: Path, run_runner: Runner, pinned_site: Path
) -> None:
    run = run_runner(bundle, "--verify-only", site=pinned_site)
    assert run.returncode == 0, run.stderr
    assert run.status["torch_version"] == PINNED_PACKAGES["torch"]
    assert not (run.imported & ML_MODULES)


def test_verify_only_does_not_modify_the_bundle(bundle: Path, run_runner: Runner) -> None:
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    assert run_runner(bundle, "--verify-only").returncode == 0
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before


def test_without_the_environment_names_the_missing_package(
    bundle: Path, run_runner: Runner
) -> None:
    run = run_runner(bundle, "--verify-only", site=False)
    _violation(run, "environment-lock")
    assert "accelerate==1.15.0 is not installed" in run.stderr
    assert "pip install -r requirements.lock" in run.stderr


def test_a_differing_package_version_is_rejected(
    bundle: Path, run_runner: Runner, tmp_path: Path
) -> None:
    site = fake_site(tmp_path / "site", {**PINNED_PACKAGES, "trl": "1.8.0"})
    run = run_runner(bundle, "--verify-only", site=site)
    _violation(run, "environment-lock")
    assert "trl 1.8.0 differs from the lock's 1.16.0" in run.stderr


def test_a_local_build_suffix_is_tolerated(
    bundle: Path, run_runner: Runner, tmp_path: Path
) -> None:
    site = fake_site(tmp_path / "site", {**PINNED_PACKAGES, "torch": "2.13.0+rocm7.2"})
    run = run_runner(bundle, "--verify-only", site=site)
    assert run.returncode == 0, run.stderr
    assert run.status["torch_version"] == "2.13.0+rocm7.2"


@pytest.mark.parametrize("torch_version", ["2.11.0+cu130", "2.6.0", "2.13.1"])
def test_platform_torch_is_admitted_only_with_the_flag(
    bundle: Path, run_runner: Runner, tmp_path: Path, torch_version: str
) -> None:
    site = fake_site(tmp_path / "site", {**PINNED_PACKAGES, "torch": torch_version})
    plain = run_runner(bundle, "--verify-only", site=site)
    _violation(plain, "environment-lock")
    assert "--platform-torch" in plain.stderr
    admitted = run_runner(bundle, "--verify-only", "--platform-torch", site=site)
    assert admitted.returncode == 0, admitted.stderr
    assert admitted.status["torch_version"] == torch_version


@pytest.mark.parametrize("torch_version", ["2.5.1", "2.14.0+cu130", "3.0.0", "2.12.0rc1"])
def test_platform_torch_outside_the_declared_range_is_rejected(
    bundle: Path, run_runner: Runner, tmp_path: Path, torch_version: str
) -> None:
    site = fake_site(tmp_path / "site", {**PINNED_PACKAGES, "torch": torch_version})
    run = run_runner(bundle, "--verify-only", "--platform-torch", site=site)
    _violation(run, "environment-lock")
    assert "outside the lock's admitted range" in run.stderr


def test_platform_torch_admits_nothing_but_torch(
    bundle: Path, run_runner: Runner, tmp_path: Path
) -> None:
    site = fake_site(
        tmp_path / "site",
        {**PINNED_PACKAGES, "torch": "2.11.0+cu130", "transformers": "5.17.0"},
    )
    run = run_runner(bundle, "--verify-only", "--platform-torch", site=site)
    _violation(run, "environment-lock")
    assert "transformers 5.17.0 differs" in run.stderr


@pytest.mark.parametrize("value", ["2", "0", "two"])
def test_world_size_other_than_one_is_rejected(
    bundle: Path, run_runner: Runner, value: str
) -> None:
    _violation(run_runner(bundle, "--verify-only", env={"WORLD_SIZE": value}), "world-size")


def test_world_size_one_is_fine(bundle: Path, run_runner: Runner) -> None:
    assert run_runner(bundle, "--verify-only", env={"WORLD_SIZE": "1"}).returncode == 0


def test_a_modified_script_needs_allow_custom_script(
    bundle: Path, run_runner: Runner, tmp_path: Path
) -> None:
    custom = tmp_path / "custom_train.py"
    custom.write_bytes(reference_script().data + b"\n# tuned locally\n")
    _violation(run_runner(bundle, "--verify-only", script=custom), "custom-script")
    run = run_runner(bundle, "--verify-only", "--allow-custom-script", script=custom)
    assert run.returncode == 0, run.stderr
    assert run.status["reference_script_match"] is False


def test_an_existing_result_is_rejected(bundle: Path, run_runner: Runner) -> None:
    (bundle / "kiln_hf_result.json").write_text("{}")
    _violation(run_runner(bundle, "--verify-only"), "existing-result")


@pytest.mark.parametrize(
    "name", ["adapter_model.safetensors", "executed_train.py", "notes.txt", "sub/log.txt"]
)
def test_unattributed_outputs_are_rejected(bundle: Path, run_runner: Runner, name: str) -> None:
    path = bundle / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    _violation(run_runner(bundle, "--verify-only"), "unattributed-outputs")


def test_interrupted_run_residue_is_reported_by_verify_only(
    bundle: Path, run_runner: Runner
) -> None:
    (bundle / ".kiln_hf_result.incomplete").write_bytes(b"kiln.hf-trl-result.incomplete.v1\n")
    (bundle / "adapter_config.json").write_text("{}")
    _violation(run_runner(bundle, "--verify-only"), "interrupted-run")


def _artifacts(bundle: Path) -> list[str]:
    return sorted(
        str(p.relative_to(bundle))
        for p in bundle.rglob("*")
        if p.is_file() and p.name != "kiln_hf_export.json"
    )


def test_a_byte_flip_in_every_artifact_is_rejected(
    bundle: Path, run_runner: Runner, tmp_path: Path
) -> None:
    for rel in _artifacts(bundle):
        copy = tmp_path / f"flip-{rel.replace('/', '_')}" / bundle.name
        shutil.copytree(bundle, copy)
        data = bytearray((copy / rel).read_bytes())
        data[len(data) // 2] ^= 0x01
        (copy / rel).write_bytes(bytes(data))
        run = run_runner(copy, "--verify-only", script=bundle / "train.py")
        _violation(run, "artifact-identity")
        assert rel in run.stderr


def test_every_missing_file_is_rejected(bundle: Path, run_runner: Runner, tmp_path: Path) -> None:
    for rel in [*_artifacts(bundle), "kiln_hf_export.json"]:
        copy = tmp_path / f"missing-{rel.replace('/', '_')}" / bundle.name
        shutil.copytree(bundle, copy)
        (copy / rel).unlink()
        run = run_runner(copy, "--verify-only", script=bundle / "train.py")
        _violation(run, "artifact-missing")


def test_a_symlinked_artifact_is_rejected(bundle: Path, run_runner: Runner) -> None:
    target = bundle.parent / "elsewhere.jsonl"
    os.replace(bundle / "train.jsonl", target)
    (bundle / "train.jsonl").symlink_to(target)
    _violation(run_runner(bundle, "--verify-only"), "artifact-not-regular")


def test_a_symlinked_bundle_root_is_rejected(bundle: Path, run_runner: Runner) -> None:
    link = bundle.parent / "link.kiln-hf"
    link.symlink_to(bundle)
    _violation(run_runner(link, "--verify-only", script=bundle / "train.py"), "bundle-root")


def test_a_tampered_manifest_fails_its_self_digest(bundle: Path, run_runner: Runner) -> None:
    manifest = json.loads((bundle / "kiln_hf_export.json").read_text())
    manifest["model"]["served_model_id"] = "other/model"
    write_manifest(bundle, manifest)
    _violation(run_runner(bundle, "--verify-only"), "manifest-digest")


def test_unknown_and_duplicate_manifest_fields_are_rejected(
    bundle: Path, run_runner: Runner
) -> None:
    manifest = json.loads((bundle / "kiln_hf_export.json").read_text())
    write_manifest(bundle, seal({**manifest, "extra": 1}))
    _violation(run_runner(bundle, "--verify-only"), "manifest-shape")
    text = (bundle / "kiln_hf_export.json").read_text()
    (bundle / "kiln_hf_export.json").write_text(text.replace('"extra": 1', '"task": "sft"'))
    _violation(run_runner(bundle, "--verify-only"), "strict-json")


def test_the_provenance_cross_check(bundle: Path, run_runner: Runner) -> None:
    manifest = json.loads((bundle / "kiln_hf_export.json").read_text())
    manifest["source_execution_provenance"]["model"]["tokenizer_vocab_sha256"] = (
        "sha256:" + "0" * 64
    )
    write_manifest(bundle, seal(manifest))
    _violation(run_runner(bundle, "--verify-only"), "provenance-cross-check")


def test_a_changed_base_shard_is_rejected(
    bundle: Path, run_runner: Runner, model_dir: Path
) -> None:
    shard = model_dir / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-1] + b"\x03")
    run = run_runner(bundle, "--verify-only")
    _violation(run, "base-model")
    assert "model-00002-of-00002.safetensors" in run.stderr


def test_a_missing_base_shard_or_config_is_rejected(
    bundle: Path, run_runner: Runner, model_dir: Path
) -> None:
    (model_dir / "config.json").unlink()
    _violation(run_runner(bundle, "--verify-only"), "base-model")
    (model_dir / "config.json").write_text("{}")
    (model_dir / "model-00001-of-00002.safetensors").unlink()
    _violation(run_runner(bundle, "--verify-only"), "base-model")


def test_base_tokenizer_compares_semantically(
    bundle: Path, run_runner: Runner, model_dir: Path
) -> None:
    # legacy "a b" merges in the model dir equal the bundle's ["a","b"] pairs
    assert run_runner(bundle, "--verify-only").returncode == 0
    doc = json.loads(fake_tokenizer(legacy_merges=True))
    doc["model"]["merges"].append("c d")
    (model_dir / "tokenizer.json").write_text(json.dumps(doc))
    _violation(run_runner(bundle, "--verify-only"), "base-model-tokenizer")


def test_a_lock_with_other_pins_is_rejected(
    tmp_path: Path, model_dir: Path, run_runner: Runner
) -> None:
    lock = b"torch==2.13.0\ntransformers==5.24.0\n"
    root = tmp_path / "lock.kiln-hf"
    make_bundle(root, model_dir, lock=lock)
    _violation(run_runner(root, "--verify-only"), "environment-lock")


def test_a_template_without_generation_blocks_is_rejected(
    tmp_path: Path, model_dir: Path, run_runner: Runner
) -> None:
    root = tmp_path / "tpl.kiln-hf"
    make_bundle(root, model_dir, training_template="{{ messages }}")
    _violation(run_runner(root, "--verify-only"), "training-template")


def test_grpo_bundle_verifies(tmp_path: Path, model_dir: Path, run_runner: Runner) -> None:
    root = tmp_path / "grpo.kiln-hf"
    manifest = make_bundle(root, model_dir, task="grpo")
    run = run_runner(root, "--verify-only")
    assert run.returncode == 0, run.stderr
    assert run.status["task"] == "grpo"
    assert run.status["export_sha256"] == manifest["export_sha256"]
    assert run.status["rows"] == 2
    _violation(run_runner(root, "--verify-only", "--batch-size", "3"), "grpo-flags")
    _violation(run_runner(root, "--verify-only", "--max-length", "8"), "grpo-flags")


def test_grpo_groups_must_share_one_width(
    tmp_path: Path, model_dir: Path, run_runner: Runner
) -> None:
    from .kit import default_grpo_groups

    groups = default_grpo_groups()
    groups[1]["completions"].append(groups[1]["completions"][0])
    root = tmp_path / "grpo.kiln-hf"
    make_bundle(root, model_dir, task="grpo", grpo_rows=groups)
    _violation(run_runner(root, "--verify-only"), "grpo-corpus")


def test_invalid_flags_exit_2(bundle: Path, run_runner: Runner) -> None:
    for flags in (
        ["--learning-rate", "0"],
        ["--seed", "-1"],
        ["--target-modules", "all-linear"],
        ["--target-modules", "q_proj,q_proj"],
        ["--epochs", "nan"],
    ):
        run = run_runner(bundle, "--verify-only", *flags)
        assert run.returncode == 2, flags
