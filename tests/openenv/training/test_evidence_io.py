"""The evidence files: bounded no-symlink reading, all-or-nothing writing, hostile receipts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_TRAINING_EVIDENCE_BYTES
from kiln_verify.openenv.training.evidence_io import (
    ADAPTER_MANIFEST_FILE,
    TRAIN_RECEIPT_FILE,
    adapter_files,
    evidence_bytes,
    read_adapter_manifest,
    read_evidence_file,
    read_train_receipt,
    write_evidence,
)
from tests.openenv.training.chain_support import Chain, build_chain
from tests.openenv.training.conftest import Collected


@pytest.fixture
def chain(collected: Collected, tmp_path: Path) -> Chain:
    return build_chain(collected, tmp_path)


def code_of(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(KilnError) as caught:
        call(*args, **kwargs)
    return caught.value.code


def test_written_bytes_read_back_as_the_same_records(chain: Chain) -> None:
    receipt_data = read_evidence_file(chain.receipt_path)
    assert receipt_data == evidence_bytes(chain.receipt)
    assert receipt_data.endswith(b"}\n")
    assert read_train_receipt(receipt_data) == chain.receipt
    assert read_adapter_manifest(read_evidence_file(chain.manifest_path)) == chain.manifest
    keys = list(json.loads(receipt_data))
    assert keys == [
        "schema", "output_adapter", "corpus_sha256", "corpus_bytes",
        "training_contract_sha256", "training_data", "trainer",
    ]  # fmt: skip


def test_the_reader_takes_regular_files_of_at_most_4_mib(tmp_path: Path) -> None:
    exact = tmp_path / "exact.json"
    exact.write_bytes(b" " * MAX_TRAINING_EVIDENCE_BYTES)
    assert len(read_evidence_file(exact)) == MAX_TRAINING_EVIDENCE_BYTES
    over = tmp_path / "over.json"
    over.write_bytes(b" " * (MAX_TRAINING_EVIDENCE_BYTES + 1))
    assert code_of(read_evidence_file, over) == "limit_exceeded"
    link = tmp_path / "link.json"
    link.symlink_to(exact)
    assert code_of(read_evidence_file, link) == "path_symlink"
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert code_of(read_evidence_file, fifo) == "path_not_regular"
    assert code_of(read_evidence_file, tmp_path) == "path_not_regular"
    assert code_of(read_evidence_file, tmp_path / "absent.json") == "path_missing"


def test_a_manifest_for_other_receipt_bytes_writes_nothing(chain: Chain, tmp_path: Path) -> None:
    target = tmp_path / "fresh"
    target.mkdir()
    other = chain.manifest.model_copy(update={"train_receipt_sha256": "sha256:" + "2" * 64})
    assert code_of(write_evidence, target, chain.receipt, other) == (
        "training_chain_manifest_mismatch"
    )
    assert list(target.iterdir()) == []


def test_existing_evidence_is_not_replaced(chain: Chain) -> None:
    directory = chain.receipt_path.parent
    chain.manifest_path.unlink()
    before = chain.receipt_path.read_bytes()
    assert code_of(write_evidence, directory, chain.receipt, chain.manifest) == "target_exists"
    assert sorted(p.name for p in directory.iterdir()) == [TRAIN_RECEIPT_FILE]
    assert chain.receipt_path.read_bytes() == before
    write_evidence(directory, chain.receipt, chain.manifest, force=True)
    assert sorted(p.name for p in directory.iterdir()) == [
        ADAPTER_MANIFEST_FILE,
        TRAIN_RECEIPT_FILE,
    ]


def test_adapter_directories_hold_only_regular_files(chain: Chain, tmp_path: Path) -> None:
    assert adapter_files(chain.adapter) == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "nested/README.md",
    ]
    os.mkfifo(chain.adapter / "nested" / "pipe")
    assert code_of(adapter_files, chain.adapter) == "path_not_regular"
    (chain.adapter / "nested" / "pipe").unlink()
    (chain.adapter / "dirlink").symlink_to(tmp_path)
    assert code_of(adapter_files, chain.adapter) == "path_symlink"


def _mutations() -> st.SearchStrategy[tuple[tuple[str, ...], Any]]:
    paths = st.sampled_from(
        [
            ("schema",),
            ("output_adapter",),
            ("corpus_sha256",),
            ("corpus_bytes",),
            ("training_data", "seed_min"),
            ("training_data", "terminations", "done"),
            ("training_data", "environments"),
            ("trainer", "exit_code"),
            ("trainer", "finished_unix_ms"),
            ("unknown",),
        ]
    )
    values = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**65), max_value=2**65),
        st.floats(allow_nan=False),
        st.text(max_size=20),
        st.lists(st.integers(), max_size=2),
    )
    return st.tuples(paths, values)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mutation=_mutations())
def test_a_mutated_receipt_is_a_typed_refusal(
    chain: Chain, mutation: tuple[tuple[str, ...], Any]
) -> None:
    path, value = mutation
    document = chain.receipt.to_json()
    target = document
    for key in path[:-1]:
        target = target[key]
    if target.get(path[-1], object()) == value and type(target.get(path[-1])) is type(value):
        return  # not a mutation
    target[path[-1]] = value
    outcome = _outcome(json.dumps(document).encode())
    if outcome == "valid":  # a value the record allows there (the chain check judges it)
        assert path in SURVIVABLE
    else:
        # json.dumps spells an infinite float `Infinity`, which strict JSON refuses
        assert outcome in {"record_invalid", "training_data_totals_inconsistent", "json_non_finite"}


SURVIVABLE = {
    ("output_adapter",),
    ("corpus_bytes",),
    ("training_data", "seed_min"),
    ("trainer", "exit_code"),
    ("trainer", "finished_unix_ms"),
}


def _outcome(data: bytes) -> str:
    try:
        read_train_receipt(data)
    except KilnError as error:
        return error.code
    return "valid"
