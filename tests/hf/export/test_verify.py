"""`hf verify`: exact file set, self-digests, every artifact byte, completed bundles."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.core.safe_tar import write_tar_gz
from kiln_verify.errors import (
    HfBundleExtraFile,
    HfBundleMissingFile,
    HfIdentityMismatch,
    KilnError,
    PathSymlink,
    UsageError,
)
from kiln_verify.hf.bundle_files import RESULT_FILES
from kiln_verify.hf.manifest import (
    FileIdentity,
    document_bytes,
    read_export,
)
from kiln_verify.hf.verify import verify_hf_path
from tests.hf.export.kit import complete_bundle


def _copy(exported: Path, tmp_path: Path, name: str = "b.kiln-hf") -> Path:
    return Path(shutil.copytree(exported, tmp_path / name))


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_every_byte_flip_is_rejected(exported: Path, tmp_path: Path) -> None:
    names = _files(exported)
    assert len(names) == 10
    for index, name in enumerate(names):
        bundle = _copy(exported, tmp_path, f"flip{index}.kiln-hf")
        path = bundle / name
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(KilnError) as caught:
            verify_hf_path(bundle)
        if name == "kiln_hf_export.json":
            assert caught.value.code in {"digest_mismatch", "json_syntax", "record_invalid"}
        else:
            assert caught.value.code == "digest_mismatch", (name, caught.value)
            assert caught.value.path == str(path)


def test_a_truncated_artifact_is_a_size_mismatch(exported: Path, tmp_path: Path) -> None:
    bundle = _copy(exported, tmp_path)
    path = bundle / "train.jsonl"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle)
    assert caught.value.code == "size_mismatch"


def test_every_missing_file_is_rejected(exported: Path, tmp_path: Path) -> None:
    for index, name in enumerate(_files(exported)):
        bundle = _copy(exported, tmp_path, f"miss{index}.kiln-hf")
        (bundle / name).unlink()
        with pytest.raises(HfBundleMissingFile) as caught:
            verify_hf_path(bundle)
        assert caught.value.path == str(bundle / name)


@pytest.mark.parametrize(
    "extra",
    ["notes.txt", "input_adapter/adapter_config.json", ".kiln_hf_result.incomplete", *RESULT_FILES],
)
def test_every_extra_file_is_rejected(exported: Path, tmp_path: Path, extra: str) -> None:
    bundle = _copy(exported, tmp_path)
    (bundle / extra).parent.mkdir(exist_ok=True)
    (bundle / extra).write_text("x")
    with pytest.raises(HfBundleExtraFile) as caught:
        verify_hf_path(bundle)
    if extra == "kiln_hf_result.json":
        assert caught.value.hint is not None
        assert "--completed" in caught.value.hint


def test_links_and_empty_directories_are_refused(exported: Path, tmp_path: Path) -> None:
    bundle = _copy(exported, tmp_path)
    (bundle / "empty").mkdir()
    with pytest.raises(HfBundleExtraFile):
        verify_hf_path(bundle)
    (bundle / "empty").rmdir()
    (bundle / "train.jsonl").rename(tmp_path / "moved.jsonl")
    (bundle / "train.jsonl").symlink_to(tmp_path / "moved.jsonl")
    with pytest.raises(PathSymlink):
        verify_hf_path(bundle)


def test_completed_bundle(exported: Path, tmp_path: Path) -> None:
    bundle = _copy(exported, tmp_path)
    result = complete_bundle(bundle)
    report = verify_hf_path(bundle, completed=True)
    assert report.kind == "completed"
    assert report.result_sha256 == result.result_sha256
    assert report.used_exported_reference_script is True
    assert report.files == 14
    with pytest.raises(HfBundleExtraFile):
        verify_hf_path(bundle)  # a pristine check refuses the result files
    for name in RESULT_FILES:
        broken = _copy(bundle, tmp_path, f"c-{name}.kiln-hf")
        data = bytearray((broken / name).read_bytes())
        data[len(data) // 2] ^= 0x01
        (broken / name).write_bytes(bytes(data))
        with pytest.raises(KilnError) as caught:
            verify_hf_path(broken, completed=True)
        expected = {"digest_mismatch", "json_syntax", "record_invalid"}
        assert caught.value.code in (expected if name.endswith(".json") else {"digest_mismatch"})
        (broken / name).unlink()
        with pytest.raises(HfBundleMissingFile):
            verify_hf_path(broken, completed=True)
    with pytest.raises(HfBundleMissingFile):
        verify_hf_path(exported, completed=True)


def test_completed_adapter_structure_is_checked(exported: Path, tmp_path: Path) -> None:
    """`--completed` refuses, with import-peft's code, an adapter that is consistent with
    its digests but cannot load on the exported model (tensor rank is not the config's)."""
    bundle = _copy(exported, tmp_path)
    complete_bundle(bundle, shape_rank=3)
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle, completed=True)
    assert caught.value.code == "adapter_unloadable"
    assert caught.value.path == str(bundle / "adapter_model.safetensors")
    archive = tmp_path / "b.kiln-hf.tar.gz"
    write_tar_gz(bundle, archive, root_name="b.kiln-hf")
    with pytest.raises(KilnError) as caught:
        verify_hf_path(archive, completed=True)
    assert caught.value.code == "adapter_unloadable"


def test_result_must_name_this_export(exported: Path, tmp_path: Path) -> None:
    bundle = _copy(exported, tmp_path)
    complete_bundle(bundle, export_sha256="sha256:" + "1" * 64)
    with pytest.raises(HfIdentityMismatch):
        verify_hf_path(bundle, completed=True)


def test_resealed_manifest_cannot_hide_a_changed_row(exported: Path, tmp_path: Path) -> None:
    """Changing a row and re-sealing every identity still breaks the receipt's row hash."""
    bundle = _copy(exported, tmp_path)
    dataset = bundle / "train.jsonl"
    rows = dataset.read_bytes().replace(b"four", b"five")
    dataset.write_bytes(rows)
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    from kiln_verify.core.digest import identify

    dataset_id = FileIdentity.from_artifact(identify(bundle, "train.jsonl", max_bytes=1 << 20))
    data = export.data.model_copy(update={"dataset": dataset_id})
    forged = export.model_copy(update={"data": data}).sealed()
    (bundle / "kiln_hf_export.json").write_bytes(document_bytes(forged))
    with pytest.raises(HfIdentityMismatch) as caught:
        verify_hf_path(bundle)
    assert caught.value.line == 1


def test_archives(exported: Path, tmp_path: Path) -> None:
    archive = tmp_path / "b.kiln-hf.tar.gz"
    write_tar_gz(exported, archive, root_name="b.kiln-hf")
    assert verify_hf_path(archive).kind == "pristine"
    renamed = tmp_path / "c.kiln-hf.tar.gz"
    shutil.copy(archive, renamed)
    with pytest.raises(KilnError) as caught:
        verify_hf_path(renamed)  # the root must be the name the file carries
    assert caught.value.code == "archive_root_invalid"
    odd = tmp_path / "b.tgz"
    shutil.copy(archive, odd)
    with pytest.raises(UsageError):
        verify_hf_path(odd)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_cli_exit_codes(exported: Path, tmp_path: Path) -> None:
    cli = CliRunner()
    ok = cli.invoke(app, ["hf", "verify", str(exported)])
    assert ok.exit_code == 0
    assert "verified" in ok.output
    bundle = _copy(exported, tmp_path)
    (bundle / "extra").write_text("x")
    bad = cli.invoke(app, ["hf", "verify", str(bundle), "--json"])
    assert bad.exit_code == 1
    error = json.loads(bad.output)["error"]
    assert error["code"] == "hf_bundle_extra_file"
    assert error["path"] == str(bundle / "extra")
    assert "hint" in error
    usage = cli.invoke(app, ["hf", "verify", str(tmp_path / "nothing")])
    assert usage.exit_code == 2
    assert cli.invoke(app, ["hf", "export-sft", "--model", "x"]).exit_code == 2
    missing = cli.invoke(
        app,
        [
            "hf",
            "export-sft",
            "--model",
            str(exported),
            "--file",
            "f",
            "--name",
            "n",
            "--invalid-row-policy",
            "maybe",
            "--output",
            str(tmp_path / "n.kiln-hf.tar.gz"),
        ],
    )
    assert missing.exit_code == 2
