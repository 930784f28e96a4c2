"""``kiln-verify hf import-peft``: the SFT round trip and every refusal leaving nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.core.digest import Sha256Digest
from kiln_verify.errors import KilnError
from kiln_verify.hf.digests import adapter_content_revision
from kiln_verify.hf.importer import INSTALLED_FILES, import_peft, verify_installed
from kiln_verify.hf.manifest import FileIdentity, document_bytes, read_import, read_result
from kiln_verify.hf.manifest.import_receipt import ResidentModelIdentity
from kiln_verify.hf.manifest.read import read_export

from .conftest import Completed, tree

pytestmark = pytest.mark.slow


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    from kiln_verify.cli import app

    out = CliRunner().invoke(app, ["hf", *args, "--json"])
    return out.exit_code, json.loads(out.stdout)


def _import(bundle: Path, model: Path, registry: Path, name: str = "support-v2") -> Any:
    return _cli(
        "import-peft",
        "--bundle",
        str(bundle),
        "--name",
        name,
        "--model",
        str(model),
        "--registry",
        str(registry),
    )


def test_sft_round_trip_installs_a_loadable_adapter(completed: Completed, tmp_path: Path) -> None:
    before = tree(completed.bundle)
    code, verified = _cli("verify", "--completed", str(completed.bundle))
    assert code == 0, verified
    assert verified["kind"] == "completed"

    registry = tmp_path / "registry"
    registry.mkdir()
    code, report = _import(completed.bundle, completed.model, registry)
    assert code == 0, report
    installed = registry / "support-v2"
    assert sorted(p.name for p in registry.iterdir()) == ["support-v2"]
    assert sorted(p.name for p in installed.iterdir()) == sorted(INSTALLED_FILES)
    assert tree(completed.bundle) == before  # the bundle is only read

    export = read_export((installed / "kiln_hf_export.json").read_bytes())
    result = read_result((installed / "kiln_hf_result.json").read_bytes())
    raw = (installed / "kiln_hf_import.json").read_bytes()
    receipt = read_import(raw)
    assert raw == document_bytes(receipt)
    assert raw.endswith(b"}\n")
    assert receipt.adapter_name == "support-v2"
    assert receipt.task == "sft"
    assert receipt.export_sha256 == export.export_sha256 == report["export_sha256"]
    assert receipt.result_sha256 == result.result_sha256 == report["result_sha256"]
    assert receipt.import_sha256 == report["import_sha256"]
    assert receipt.resident_model == ResidentModelIdentity.from_export(export.model)
    assert receipt.used_exported_reference_script is True
    assert report["used_exported_reference_script"] is True
    weights = (installed / "adapter_model.safetensors").read_bytes()
    config = (installed / "adapter_config.json").read_bytes()
    import hashlib

    assert report["content_revision"] == adapter_content_revision(
        Sha256Digest.parse("sha256:" + hashlib.sha256(weights).hexdigest()),
        len(weights),
        Sha256Digest.parse("sha256:" + hashlib.sha256(config).hexdigest()),
    )
    assert report["files"] == 6
    assert report["installed_bytes"] == sum(p.stat().st_size for p in installed.iterdir())
    for name in INSTALLED_FILES[:-1]:
        assert (installed / name).read_bytes() == (completed.bundle / name).read_bytes()
    assert verify_installed(installed).receipt == receipt

    # PEFT loads the installed directory on the tiny model and changes its logits.
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(completed.model), dtype=torch.float32)
    ids = torch.tensor([[1, 5, 9, 17, 33, 2]])
    with torch.no_grad():
        plain = base(input_ids=ids).logits.clone()
        tuned = PeftModel.from_pretrained(base, str(installed))
        adapted = tuned(input_ids=ids).logits
        with tuned.disable_adapter():
            disabled = tuned(input_ids=ids).logits
    assert torch.equal(disabled, plain)
    delta = (adapted - plain).abs().max().item()
    assert delta > 1e-6, delta

    # the same name again is refused, and the installed adapter is untouched
    snapshot = tree(registry)
    code, again = _import(completed.bundle, completed.model, registry)
    assert code == 1
    assert again["error"]["code"] == "target_exists"
    assert tree(registry) == snapshot


def test_existing_registry_name_is_refused_and_untouched(
    completed: Completed, tmp_path: Path
) -> None:
    registry = tmp_path / "registry"
    (registry / "support-v2").mkdir(parents=True)
    (registry / "support-v2" / "mine.txt").write_bytes(b"keep me\n")
    (registry / "other").mkdir()
    before = tree(registry)
    code, report = _import(completed.bundle, completed.model, registry)
    assert code == 1
    assert report["error"]["code"] == "target_exists"
    assert tree(registry) == before


def _different_model(completed: Completed, tmp_path: Path) -> Path:
    """Same file names and directory name, one weight byte changed."""
    other = Path(shutil.copytree(completed.model, tmp_path / "other" / completed.model.name))
    shard = other / "model.safetensors"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0x01
    shard.write_bytes(bytes(data))
    return other


def test_a_different_resident_model_is_refused(completed: Completed, tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    code, report = _import(completed.bundle, _different_model(completed, tmp_path), registry)
    assert code == 1
    assert report["error"]["code"] == "resident_identity_mismatch"
    assert "base_weight_shard_manifest" in report["error"]["rule"]
    assert list(registry.iterdir()) == []


def test_a_changed_tokenizer_is_refused(completed: Completed, tmp_path: Path) -> None:
    other = Path(shutil.copytree(completed.model, tmp_path / "other" / completed.model.name))
    doc = json.loads((other / "tokenizer.json").read_text())
    vocab = doc["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[10:12]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (other / "tokenizer.json").write_text(json.dumps(doc))
    registry = tmp_path / "registry"
    registry.mkdir()
    with pytest.raises(KilnError) as caught:
        import_peft(bundle=completed.bundle, name="a", model=other, registry=registry)
    assert caught.value.code == "resident_identity_mismatch"
    assert "tokenizer_vocab_sha256" in str(caught.value)
    assert list(registry.iterdir()) == []


def test_a_flipped_adapter_byte_fails_completed_verification(
    completed: Completed, bundle_copy: Path, tmp_path: Path
) -> None:
    weights = bundle_copy / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x40
    weights.write_bytes(bytes(data))
    before = tree(bundle_copy)
    registry = tmp_path / "registry"
    registry.mkdir()
    code, report = _import(bundle_copy, completed.model, registry)
    assert code == 1
    assert report["error"]["code"] == "digest_mismatch"
    assert list(registry.iterdir()) == []
    assert tree(bundle_copy) == before


def _reseal_adapter_config(bundle: Path, config: dict[str, Any]) -> None:
    """Rewrite adapter_config.json and re-seal the result: self-consistent but wrong."""
    raw = (json.dumps(config, indent=2) + "\n").encode()
    (bundle / "adapter_config.json").write_bytes(raw)
    result = read_result((bundle / "kiln_hf_result.json").read_bytes())
    import hashlib

    identity = FileIdentity(
        relative_path="adapter_config.json",
        size_bytes=len(raw),
        sha256="sha256:" + hashlib.sha256(raw).hexdigest(),
    )
    adapter = result.output_adapter.model_copy(update={"config": identity})
    resealed = result.model_copy(update={"output_adapter": adapter}).sealed()
    (bundle / "kiln_hf_result.json").write_bytes(document_bytes(resealed))


def test_a_resealed_wrong_rank_is_unloadable(
    completed: Completed, bundle_copy: Path, tmp_path: Path
) -> None:
    config = json.loads((bundle_copy / "adapter_config.json").read_text())
    config["r"] = config["r"] + 2
    _reseal_adapter_config(bundle_copy, config)
    code, verified = _cli("verify", "--completed", str(bundle_copy))
    # Consistent digests, but `verify --completed` applies import-peft's structure check.
    assert code == 1, verified
    assert verified["error"]["code"] == "adapter_unloadable", verified
    registry = tmp_path / "registry"
    registry.mkdir()
    code, report = _import(bundle_copy, completed.model, registry)
    assert code == 1, report
    assert report["error"]["code"] == "adapter_unloadable", report
    assert list(registry.iterdir()) == []


def test_a_resealed_unsupported_target_is_unloadable(
    completed: Completed, bundle_copy: Path, tmp_path: Path
) -> None:
    config = json.loads((bundle_copy / "adapter_config.json").read_text())
    config["target_modules"] = [*config["target_modules"], "lm_head"]
    _reseal_adapter_config(bundle_copy, config)
    registry = tmp_path / "registry"
    registry.mkdir()
    with pytest.raises(KilnError) as caught:
        import_peft(bundle=bundle_copy, name="x", model=completed.model, registry=registry)
    assert caught.value.code == "adapter_unloadable"
    assert list(registry.iterdir()) == []


def test_a_pristine_bundle_is_not_importable(
    completed: Completed, bundle_copy: Path, tmp_path: Path
) -> None:
    (bundle_copy / "kiln_hf_result.json").unlink()
    registry = tmp_path / "registry"
    registry.mkdir()
    code, report = _import(bundle_copy, completed.model, registry)
    assert code == 1
    assert report["error"]["code"] == "hf_bundle_missing_file"
    assert list(registry.iterdir()) == []


@pytest.mark.parametrize("name", ["..", ".hidden", "a/b", "a..b", "", "x" * 129, "é"])
def test_bad_adapter_names_are_usage_errors(
    completed: Completed, tmp_path: Path, name: str
) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    code, report = _import(completed.bundle, completed.model, registry, name=name)
    assert code == 2
    assert report["error"]["code"] == "usage"
    assert list(registry.iterdir()) == []


def test_installed_directory_verification_catches_changes(
    completed: Completed, tmp_path: Path
) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    outcome = import_peft(
        bundle=completed.bundle, name="v1.0", model=completed.model, registry=registry
    )
    assert outcome.directory == registry / "v1.0"
    moved = registry / "v2.0"
    shutil.copytree(outcome.directory, moved)
    with pytest.raises(KilnError) as caught:
        verify_installed(moved)  # the receipt binds the name
    assert caught.value.code == "hf_identity_mismatch"
    (outcome.directory / "extra.log").write_bytes(b"x")
    with pytest.raises(KilnError) as caught:
        verify_installed(outcome.directory)
    assert caught.value.code == "hf_bundle_extra_file"


def test_a_missing_registry_is_created_private(completed: Completed, tmp_path: Path) -> None:
    registry = tmp_path / "new-registry"
    code, report = _import(completed.bundle, completed.model, registry)
    assert code == 0, report
    assert registry.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in registry.iterdir()) == ["support-v2"]


def test_a_registry_without_its_parent_is_refused(completed: Completed, tmp_path: Path) -> None:
    code, report = _import(completed.bundle, completed.model, tmp_path / "a" / "registry")
    assert code == 2
    assert report["error"]["rule"] == "the registry's parent directory does not exist"
    assert not (tmp_path / "a").exists()


def test_an_untrained_bundle_says_to_run_train_py_first(
    completed: Completed, bundle_copy: Path, tmp_path: Path
) -> None:
    from kiln_verify.hf.bundle_files import RESULT_FILES

    for name in RESULT_FILES:
        (bundle_copy / name).unlink()
    code, verified = _cli("verify", "--completed", str(bundle_copy))
    assert code == 1
    assert verified["error"]["hint"] == (
        f"this bundle has not been trained yet: run its train.py first "
        f"(python -I {bundle_copy / 'train.py'} {bundle_copy} --base-model MODEL)"
    )
    code, imported = _import(bundle_copy, completed.model, tmp_path / "registry")
    assert code == 1
    assert imported["error"]["hint"] == verified["error"]["hint"]


def test_a_served_model_id_mismatch_names_the_flag(completed: Completed, tmp_path: Path) -> None:
    renamed = Path(shutil.copytree(completed.model, tmp_path / "renamed-model"))
    code, report = _import(completed.bundle, renamed, tmp_path / "registry")
    assert code == 1
    error = report["error"]
    assert error["code"] == "resident_identity_mismatch"
    assert error["rule"] == (
        f"resident served_model_id is renamed-model, the export was made from "
        f"{completed.model.name}"
    )
    assert f"--served-model-id {completed.model.name}" in error["hint"]
    code, report = _cli("import-peft", "--bundle", str(completed.bundle), "--name", "s",
                        "--model", str(renamed), "--registry", str(tmp_path / "registry"),
                        "--served-model-id", completed.model.name)  # fmt: skip
    assert code == 0, report
