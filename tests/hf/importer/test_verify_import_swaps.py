"""One open, one truth in `hf verify-import --model` on a directory (issue 14.6).

The envelope or installed adapter is verified (every file hashed), then the checks against
the resident model read the adapter and the templates again. For a directory given by the
operator those reads now go to a private copy that is itself verified; a file swapped in
the operator's directory between the hash and the copy makes the copy fail verification,
and one swapped after the copy is never read. The swap is timed by wrapping the verifier.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.hf import verify_import
from kiln_verify.hf.envelope import verify_envelope, write_envelope_archive
from kiln_verify.hf.importer import import_peft, verify_installed

from .conftest import Completed

pytestmark = pytest.mark.slow


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    swap = path.with_name(path.name + ".swap")
    swap.write_bytes(bytes(data))
    os.replace(swap, path)


def _envelope(completed: Completed, tmp_path: Path) -> Path:
    archive = write_envelope_archive(
        completed.bundle, "swap-v1", tmp_path / "swap-v1.kiln-hf-import.tar.gz"
    ).archive
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    return tmp_path / "x" / "swap-v1.kiln-hf-import"


@pytest.mark.parametrize("name", ["adapter_model.safetensors", "training_chat_template.jinja"])
def test_envelope_directory_swapped_after_verification(
    completed: Completed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    envelope = _envelope(completed, tmp_path)
    verify_import.verify_import_path(envelope, model=completed.model)  # intact: verified
    original = verify_envelope
    calls: list[str] = []

    def verify_then_swap(root: str | os.PathLike[str]) -> Any:
        calls.append(os.fspath(root))
        report = original(root)
        if len(calls) == 1:  # the operator's directory: swap right after it was hashed
            _flip_last_byte(envelope / name)
        return report

    monkeypatch.setattr(verify_import, "verify_envelope", verify_then_swap)
    with pytest.raises(KilnError) as caught:
        verify_import.verify_import_path(envelope, model=completed.model)
    assert caught.value.code == "digest_mismatch"
    assert len(calls) == 2  # the second verification is of the private copy
    assert calls[1] != os.fspath(envelope)


def test_installed_directory_swapped_after_verification(
    completed: Completed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    outcome = import_peft(
        bundle=completed.bundle, name="swap-v2", model=completed.model, registry=registry
    )
    original = verify_installed
    calls: list[str] = []

    def verify_then_swap(directory: str | os.PathLike[str], *, name: str | None = None) -> Any:
        calls.append(os.fspath(directory))
        installed = original(directory, name=name)
        if len(calls) == 1:
            _flip_last_byte(outcome.directory / "adapter_config.json")
        return installed

    monkeypatch.setattr(verify_import, "verify_installed", verify_then_swap)
    with pytest.raises(KilnError) as caught:
        verify_import.verify_import_path(outcome.directory, model=completed.model)
    assert caught.value.code in {"digest_mismatch", "size_mismatch"}
    assert len(calls) == 2
