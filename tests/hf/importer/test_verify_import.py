"""``kiln-verify hf verify-import``: envelope archives, envelope directories and installed
adapters, with and without a resident model."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.hf.envelope import write_envelope_archive
from kiln_verify.hf.importer import import_peft

from .conftest import Completed
from .test_import import _different_model

pytestmark = pytest.mark.slow


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    from kiln_verify.cli import app

    out = CliRunner().invoke(app, ["hf", "verify-import", *args, "--json"])
    return out.exit_code, json.loads(out.stdout)


@pytest.fixture
def archive(completed: Completed, tmp_path: Path) -> Path:
    out = tmp_path / "support-v3.kiln-hf-import.tar.gz"
    return write_envelope_archive(completed.bundle, "support-v3", out).archive


def test_envelope_archive_and_directory(
    completed: Completed, archive: Path, tmp_path: Path
) -> None:
    code, report = _cli(str(archive))
    assert code == 0, report
    assert report["kind"] == "import_envelope"
    assert report["files"] == 10
    assert report["resident_model_checked"] is False
    export = json.loads((completed.bundle / "kiln_hf_export.json").read_text())
    assert report["export_sha256"] == export["export_sha256"]
    assert sorted(p.name for p in archive.parent.iterdir()) == [archive.name]  # no residue

    code, checked = _cli(str(archive), "--model", str(completed.model))
    assert code == 0, checked
    assert checked["resident_model_checked"] is True
    code, refused = _cli(str(archive), "--model", str(_different_model(completed, tmp_path)))
    assert code == 1
    assert refused["error"]["code"] == "resident_identity_mismatch"

    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    envelope = tmp_path / "x" / "support-v3.kiln-hf-import"
    code, direct = _cli(str(envelope))
    assert code == 0, direct
    assert direct == report
    weights = envelope / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    code, flipped = _cli(str(envelope))
    assert code == 1
    assert flipped["error"]["code"] == "digest_mismatch"


def test_installed_adapter(completed: Completed, tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    outcome = import_peft(
        bundle=completed.bundle, name="support-v4", model=completed.model, registry=registry
    )
    code, report = _cli(str(outcome.directory), "--model", str(completed.model))
    assert code == 0, report
    assert report["kind"] == "installed_adapter"
    assert report["adapter_name"] == "support-v4"
    assert report["resident_model_checked"] is True
    imported = outcome.to_json()
    for key in ("export_sha256", "result_sha256", "import_sha256", "content_revision"):
        assert report[key] == imported[key], key

    moved = Path(shutil.copytree(outcome.directory, tmp_path / "elsewhere" / "renamed"))
    code, wrong = _cli(str(moved))
    assert code == 1
    assert wrong["error"]["code"] == "hf_identity_mismatch"
    code, named = _cli(str(moved), "--name", "support-v4")
    assert code == 0, named

    code, other = _cli(str(moved), "--name", "support-v4", "--model", str(
        _different_model(completed, tmp_path)
    ))
    assert code == 1
    assert other["error"]["code"] == "resident_identity_mismatch"

    code, missing = _cli(str(tmp_path / "nope"))
    assert code == 2
    assert missing["error"]["code"] == "usage"
