"""The ten-file import envelope: determinism, exact contents, verification, size limits."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.errors import KilnError, LimitExceeded
from kiln_verify.hf.envelope import (
    ENVELOPE_FILES,
    check_import_sizes,
    materialized_envelope,
    verify_envelope,
    verify_envelope_archive,
    write_envelope_archive,
)
from kiln_verify.limits import GiB, MiB

from .conftest import Completed, tree

pytestmark = pytest.mark.slow


def test_envelope_archive_is_deterministic_and_verifies(
    completed: Completed, tmp_path: Path
) -> None:
    from kiln_verify.cli import app

    before = tree(completed.bundle)
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    out = CliRunner().invoke(
        app,
        [
            "hf",
            "envelope",
            "--bundle",
            str(completed.bundle),
            "--name",
            "support-v2",
            "--output",
            str(first_dir / "support-v2.kiln-hf-import.tar.gz"),
            "--json",
        ],
    )
    assert out.exit_code == 0, out.stdout
    report = json.loads(out.stdout)
    assert report["files"] == 10
    assert report["kind"] == "import_envelope"
    second = write_envelope_archive(
        completed.bundle, "support-v2", second_dir / "support-v2.kiln-hf-import.tar.gz"
    )
    first = first_dir / "support-v2.kiln-hf-import.tar.gz"
    assert first.read_bytes() == second.archive.read_bytes()
    assert sorted(p.name for p in first_dir.iterdir()) == [first.name]  # no staging left
    assert tree(completed.bundle) == before

    with tarfile.open(first) as archive:
        members = archive.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names[0] == "support-v2.kiln-hf-import"
    assert sorted(n.split("/", 1)[1] for n in names[1:]) == sorted(ENVELOPE_FILES)
    assert {(m.mtime, m.uid, m.gid) for m in members} == {(0, 0, 0)}
    excluded = {"train.jsonl", "train.py", "requirements.lock", "sft_ingestion.json"}
    assert not excluded & {n.rsplit("/", 1)[-1] for n in names}
    assert verify_envelope_archive(first).result.result_sha256 == report["result_sha256"]

    # the name is the archive's root: an existing output is refused, a renamed one fails
    again = CliRunner().invoke(
        app,
        [
            "hf",
            "envelope",
            "--bundle",
            str(completed.bundle),
            "--name",
            "support-v2",
            "--output",
            str(first),
            "--json",
        ],
    )
    assert again.exit_code == 1
    assert json.loads(again.stdout)["error"]["code"] == "target_exists"
    renamed = tmp_path / "other.kiln-hf-import.tar.gz"
    shutil.copy(first, renamed)
    with pytest.raises(KilnError) as caught:
        verify_envelope_archive(renamed)
    assert caught.value.code.startswith("archive_")


@pytest.fixture
def envelope_copy(completed: Completed, tmp_path: Path) -> Path:
    with materialized_envelope(completed.bundle, "env", tmp_path) as (directory, report, _):
        assert report.export.task == "sft"
        copy = Path(shutil.copytree(directory, tmp_path / "copy" / directory.name))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]  # scratch removed
    return copy


def test_envelope_verification_rejects_changes(envelope_copy: Path) -> None:
    assert verify_envelope(envelope_copy).total_bytes == sum(
        p.stat().st_size for p in envelope_copy.iterdir()
    )
    for name in ENVELOPE_FILES:
        path = envelope_copy / name
        original = path.read_bytes()
        flipped = bytearray(original)
        flipped[len(flipped) // 2] ^= 0x01
        path.write_bytes(bytes(flipped))
        with pytest.raises(KilnError) as caught:
            verify_envelope(envelope_copy)
        assert caught.value.code in {
            "digest_mismatch",
            "json_syntax",
            "record_invalid",
            "hf_identity_mismatch",
        }, (name, caught.value.code)
        path.write_bytes(original)
        path.unlink()
        with pytest.raises(KilnError) as caught:
            verify_envelope(envelope_copy)
        assert caught.value.code == "hf_bundle_missing_file", name
        path.write_bytes(original)
    (envelope_copy / "train.jsonl").write_bytes(b"{}\n")
    with pytest.raises(KilnError) as caught:
        verify_envelope(envelope_copy)
    assert caught.value.code == "hf_bundle_extra_file"


def test_import_size_limits() -> None:
    ok = {name: 1 for name in ENVELOPE_FILES}
    assert check_import_sizes(ok) == 10
    cases = {
        "kiln_hf_export.json": (8 * MiB + 1, "MAX_IMPORT_MANIFEST_BYTES"),
        "kiln_hf_result.json": (8 * MiB + 1, "MAX_IMPORT_MANIFEST_BYTES"),
        "executed_train.py": (16 * MiB + 1, "MAX_IMPORT_SCRIPT_BYTES"),
        "adapter_config.json": (1 * MiB + 1, "MAX_ADAPTER_CONFIG_BYTES"),
        "tokenizer.json": (512 * MiB + 1, "MAX_IMPORT_ARTIFACT_BYTES"),
        "chat_template.jinja": (512 * MiB + 1, "MAX_IMPORT_ARTIFACT_BYTES"),
    }
    for name, (size, limit) in cases.items():
        assert check_import_sizes({**ok, name: size - 1}) > 0
        with pytest.raises(LimitExceeded) as caught:
            check_import_sizes({**ok, name: size})
        assert caught.value.limit == limit
    weights = "adapter_model.safetensors"
    assert check_import_sizes({**ok, weights: 4 * GiB - 9}) == 4 * GiB
    for size in (4 * GiB - 8, 4 * GiB + 1):
        with pytest.raises(LimitExceeded) as caught:
            check_import_sizes({**ok, weights: size})
        assert caught.value.limit == "MAX_IMPORT_EXPANDED_BYTES"
    with pytest.raises(LimitExceeded) as caught:
        check_import_sizes(
            {**ok, "tokenizer.json": 512 * MiB, "chat_template.jinja": 512 * MiB, weights: 3 * GiB}
        )
    assert caught.value.limit == "MAX_IMPORT_EXPANDED_BYTES"
