"""One open, one truth in the runner's preflight (issue 14.6).

The preflight hashes every declared file, then reads some again to check their content
(the ingestion receipt, the SFT rows, the training template, the lock, the exported
tokenizer) and, when training, to use them. Each such read must prove it read the hashed
bytes. Here the file is swapped for other bytes right before that second open (the opener
is wrapped, no inotify needed) and the preflight must refuse with ``artifact-identity``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kiln_verify.hf.runner import train


def _swap_on_open(
    monkeypatch: pytest.MonkeyPatch, root: Path, relative: str, nth: int, change: bytes
) -> list[int]:
    """Replace ``root/relative`` (append ``change``, or rewrite its last byte when
    ``change`` is empty) just before its ``nth`` open (1-based)."""
    original: Callable[[str, str], int] = train.open_in_bundle
    opens = [0]

    def opener(bundle_root: str, path: str) -> int:
        if path == relative:
            opens[0] += 1
            if opens[0] == nth:
                target = root / relative
                data = target.read_bytes()
                data = data + change if change else data[:-1] + bytes([data[-1] ^ 0x20])
                replacement = target.with_name(target.name + ".swap")
                replacement.write_bytes(data)
                replacement.replace(target)  # a new inode under the same name
        return original(bundle_root, path)

    monkeypatch.setattr(train, "open_in_bundle", opener)
    return opens


@pytest.mark.parametrize(
    "relative",
    ["sft_ingestion.json", "train.jsonl", "training_chat_template.jinja", "requirements.lock"],
)
def test_a_file_swapped_after_hashing_is_refused(
    bundle: Path, monkeypatch: pytest.MonkeyPatch, relative: str
) -> None:
    train.load_bundle(str(bundle))  # the untouched bundle passes
    # a change every content check accepts: one more row, one more trailing newline
    first_row = (bundle / "train.jsonl").read_bytes().splitlines(keepends=True)[0]
    change = first_row if relative == "train.jsonl" else b"\n"
    opens = _swap_on_open(monkeypatch, bundle, relative, 2, change)
    with pytest.raises(train.ContractError) as caught:
        train.load_bundle(str(bundle))
    assert caught.value.rule == "artifact-identity"
    assert "changed after it was verified" in str(caught.value)
    assert opens[0] == 2  # hashed once, then read once more (and refused)


def test_the_exported_tokenizer_is_read_as_hashed(
    bundle: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = train.load_bundle(str(bundle))
    train.verify_base_model(loaded, str(model_dir))
    _swap_on_open(monkeypatch, bundle, "tokenizer.json", 1, b" ")
    with pytest.raises(train.ContractError) as caught:
        train.verify_base_model(loaded, str(model_dir))
    assert caught.value.rule == "artifact-identity"


def test_verified_lines_prove_the_rows(bundle: Path) -> None:
    loaded = train.load_bundle(str(bundle))
    ident = train.manifest_identity(loaded, "data", "dataset", "train.jsonl")
    lines = train.VerifiedLines(str(bundle), ident)
    assert b"".join(lines) == (bundle / "train.jsonl").read_bytes()
    lines.check()
    (bundle / "train.jsonl").write_bytes((bundle / "train.jsonl").read_bytes() + b"\n")
    lines = train.VerifiedLines(str(bundle), ident)
    list(lines)
    with pytest.raises(train.ContractError):
        lines.check()


def test_minus_zero_is_no_integer() -> None:
    assert train.strict_json(b'{"a":-0,"b":0,"c":-0.0}', "x") == {"a": -0.0, "b": 0, "c": -0.0}
    with pytest.raises(train.ContractError) as caught:
        train.uint(train.strict_json(b"-0", "x"), "row_count")
    assert caught.value.rule == "manifest-shape"
