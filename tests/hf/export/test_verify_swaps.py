"""One open, one truth in `hf verify` (issue 14.6).

`verify_hf_bundle` hashes every declared file (`core.digest.verify`), then reads some of them
again for their content checks: the SFT ingestion receipt, the rows of `train.jsonl`, the
TRL training template (and, for GRPO, the tokenizer and inference template the token
replay uses). Each second read must prove it read the hashed bytes. Here the file is
replaced (a new inode under the same name) right after `verify` hashed it, with a change
its content check alone would accept, and verification must refuse with `digest_mismatch`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kiln_verify.core.digest import ArtifactIdentity
from kiln_verify.core.digest import verify as digest_verify
from kiln_verify.errors import KilnError
from kiln_verify.hf import verify as hf_verify
from kiln_verify.hf.bundle_files import read_identified
from kiln_verify.hf.verify import verify_hf_path


def _replace(path: Path, data: bytes) -> None:
    swap = path.with_name(path.name + ".swap")
    swap.write_bytes(data)
    os.replace(swap, path)


@pytest.mark.parametrize(
    ("relative", "change"),
    [
        # JSON whitespace: the receipt's parsed content (and so its own checks) is the same
        ("sft_ingestion.json", lambda data: data[:-1] + b" \n"),
        # still has its generation blocks
        ("training_chat_template.jinja", lambda data: data + b"{# swapped #}"),
    ],
)
def test_a_file_swapped_after_hashing_is_refused(
    exported: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    relative: str,
    change: Callable[[bytes], bytes],
) -> None:
    """(`train.jsonl` is read once more too, and hashed as it is read; but its rows are
    canonical and bound in order by the receipt's row hashes, so no other bytes could pass
    its content check: the digest proof there is a second line of defence.)"""
    bundle = Path(shutil.copytree(exported, tmp_path / "b.kiln-hf"))
    verify_hf_path(bundle)
    target = bundle / relative
    changed = change(target.read_bytes())
    original = digest_verify
    swapped: list[str] = []

    def verify_then_swap(root: str | os.PathLike[str], identity: ArtifactIdentity) -> None:
        original(root, identity)
        if identity.relative_path == relative:
            _replace(target, changed)
            swapped.append(relative)

    monkeypatch.setattr(hf_verify, "verify", verify_then_swap)
    with pytest.raises(KilnError) as caught:
        verify_hf_path(bundle)
    assert swapped == [relative]
    assert caught.value.code == "digest_mismatch"
    assert "changed after its identity was checked" in caught.value.rule


def test_read_identified_reads_once(exported: Path, tmp_path: Path) -> None:
    from kiln_verify.hf.manifest import read_export

    bundle = Path(shutil.copytree(exported, tmp_path / "b.kiln-hf"))
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    ident = export.model.trl_training_chat_template
    data = read_identified(str(bundle), ident, 1 << 20)
    assert data == (bundle / "training_chat_template.jinja").read_bytes()
    _replace(bundle / "training_chat_template.jinja", data + b" ")
    with pytest.raises(KilnError) as caught:
        read_identified(str(bundle), ident, 1 << 20)
    assert caught.value.code == "digest_mismatch"
