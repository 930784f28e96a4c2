"""check_training_chain: a real chain passes; each link tampered once fails with its code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.errors import ERROR_CLASSES, KilnError, TrainingChainBroken
from kiln_verify.openenv.training.corpus import lineage_from_groups
from kiln_verify.openenv.training.evidence import contract_sha256
from kiln_verify.openenv.training.selection import select_for_training
from tests.openenv.training.chain_support import Chain, build_chain, contract_for
from tests.openenv.training.conftest import Collected


@pytest.fixture
def chain(collected: Collected, tmp_path: Path) -> Chain:
    return build_chain(collected, tmp_path)


def code_of(chain: Chain, **overrides: Any) -> str:
    with pytest.raises(KilnError) as caught:
        chain.check(**overrides)
    return caught.value.code


def test_a_consistent_chain_passes(chain: Chain) -> None:
    report = chain.check()
    assert report.adapter_files == 3
    assert report.adapter_bytes == 9 + 2048 + 29
    assert report.receipt.training_data.group_plan_sha256 == chain.lineage.group_plan_sha256
    assert [f.relative_path for f in report.manifest.files] == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "nested/README.md",
    ]
    assert chain.check(status_lineage=None).receipt_sha256 == report.receipt_sha256


def test_every_chain_code_names_its_two_records() -> None:
    for code, cls in ERROR_CLASSES.items():
        if issubclass(cls, TrainingChainBroken):
            error = cls("x")
            left, right = error.records
            assert str(error).startswith(f"{code}: {left} and {right} disagree: x")
            assert error.to_dict()["records"] == [left, right]


def test_an_unsuccessful_trainer(collected: Collected, tmp_path: Path) -> None:
    assert code_of(build_chain(collected, tmp_path, exit_code=1)) == "training_receipt_unsuccessful"


def test_receipt_and_manifest(chain: Chain) -> None:
    data = chain.receipt_path.read_bytes()
    chain.receipt_path.write_bytes(data + b"\n")  # the receipt changed, the manifest did not
    assert code_of(chain) == "training_chain_manifest_mismatch"
    for field in ("adapter_name", "corpus_sha256", "group_plan_sha256"):
        chain.rewrite()
        manifest = json.loads(chain.manifest_path.read_bytes())
        manifest[field] = "other" if field == "adapter_name" else "sha256:" + "0" * 64
        chain.manifest_path.write_text(json.dumps(manifest))
        assert code_of(chain) == "training_chain_manifest_mismatch", field


def test_receipt_and_corpus(chain: Chain) -> None:
    last = chain.corpus.rstrip(b"\n").rfind(b"\n") + 1
    assert code_of(chain, corpus=chain.corpus[:last]) == "training_chain_corpus_mismatch"
    flipped = chain.corpus.replace(b'"reward":', b'"reward": ', 1)
    assert code_of(chain, corpus=flipped) == "training_chain_corpus_mismatch"


def test_receipt_and_lineage(chain: Chain) -> None:
    receipt = chain.receipt.to_json()
    receipt["training_data"]["group_plan_sha256"] = "sha256:" + "1" * 64
    chain.rewrite(receipt)
    assert code_of(chain) == "training_chain_lineage_mismatch"
    receipt = chain.receipt.to_json()
    receipt["training_data"]["total_steps"] += 1
    receipt["training_data"]["environments"][0]["total_steps"] += 1
    chain.rewrite(receipt)
    assert code_of(chain) == "training_chain_lineage_mismatch"


def test_run_status_and_receipt(chain: Chain, collected: Collected) -> None:
    groups = select_for_training(collected.groups).groups[:2]
    other = lineage_from_groups(groups)
    assert code_of(chain, status_lineage=other) == "training_chain_status_mismatch"


def test_contract_and_receipt(chain: Chain, collected: Collected) -> None:
    changed = contract_for(collected, learning_rate=0.001)
    assert code_of(chain, contract=changed) == "training_chain_contract_mismatch"
    renamed = contract_for(collected, output_name="another-adapter")
    receipt = chain.receipt.to_json()
    receipt["training_contract_sha256"] = contract_sha256(renamed)
    chain.rewrite(receipt)
    assert code_of(chain, contract=renamed) == "training_chain_contract_mismatch"


def test_manifest_and_adapter_files(chain: Chain) -> None:
    weights = chain.adapter / "adapter_model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + b"\x00")
    assert code_of(chain) == "training_chain_adapter_mismatch"
    weights.write_bytes(original + b"\x00")
    assert code_of(chain) == "training_chain_adapter_mismatch"
    weights.unlink()
    assert code_of(chain) == "training_chain_adapter_mismatch"
    weights.write_bytes(original)
    (chain.adapter / "extra.bin").write_bytes(b"x")
    assert code_of(chain) == "training_chain_adapter_mismatch"
    (chain.adapter / "extra.bin").unlink()
    chain.check()


def test_links_are_refused_not_followed(chain: Chain, tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x")
    (chain.adapter / "nested" / "link.bin").symlink_to(outside)
    assert code_of(chain) == "path_symlink"
    (chain.adapter / "nested" / "link.bin").unlink()
    moved = tmp_path / "receipt-copy.json"
    moved.write_bytes(chain.receipt_path.read_bytes())
    chain.receipt_path.unlink()
    chain.receipt_path.symlink_to(moved)
    assert code_of(chain) == "path_symlink"


MANIFEST_FIELDS = st.sampled_from(["bytes", "sha256", "relative_path"])


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(index=st.integers(min_value=0, max_value=2), field=MANIFEST_FIELDS, salt=st.integers(1, 99))
def test_a_mutated_manifest_entry_is_an_adapter_mismatch(
    chain: Chain, index: int, field: str, salt: int
) -> None:
    manifest = chain.manifest.to_json()
    entry = manifest["files"][index]
    if field == "bytes":
        entry["bytes"] += salt
        manifest["total_bytes"] += salt
    elif field == "sha256":
        entry["sha256"] = "sha256:" + f"{salt:02d}" * 32
    else:
        entry["relative_path"] = entry["relative_path"] + f".{salt:02d}"
        manifest["files"].sort(key=lambda item: item["relative_path"].encode())
    chain.manifest_path.write_text(json.dumps(manifest))
    assert code_of(chain) == "training_chain_adapter_mismatch"
    chain.manifest_path.write_text(json.dumps(chain.manifest.to_json()))
