"""Digests, golden vectors shared with Kiln, bounded hashing and artifact identities."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kiln_verify.core.digest import (
    ArtifactIdentity,
    GrpoCorpusHasher,
    Sha256Digest,
    base_model_aggregate,
    canonical_digest,
    grpo_corpus_digest,
    hash_file,
    identify,
    self_digest,
    sha256_bytes,
    verify,
)
from kiln_verify.core.jsonio import loads
from kiln_verify.core.paths import validate_relative_path
from kiln_verify.errors import KilnError, LimitExceeded
from kiln_verify.limits import MAX_ARTIFACT_PATH_BYTES

ONES = Sha256Digest("1" * 64)
TWOS = Sha256Digest("2" * 64)


def code_of(excinfo: pytest.ExceptionInfo[KilnError]) -> str:
    return excinfo.value.code


# --- golden vectors (kiln-hf-trl-contract §5.1, §5.4, §5.5, §8) --------------------------


def test_golden_canonical_manifest_digest() -> None:
    document = loads(
        b'{"z":[3,{"kind":"decimal","value":"2e-5"}],"a":{"text":"qwen/3.5","flag":true},"n":42}',
        max_bytes=1024,
    )
    expected = "sha256:1a00ddf29092a9e9e9ecd4ea9faf9c48f69208e5439834c6674d1d6bfb45e258"
    assert str(canonical_digest(document)) == expected
    assert str(self_digest(document, "export_sha256")) == expected
    with_field = {**document, "export_sha256": "sha256:" + "0" * 64}
    assert str(self_digest(with_field, "export_sha256")) == expected
    assert self_digest(with_field, "result_sha256") != canonical_digest(document)


def test_golden_base_model_aggregate() -> None:
    expected = "sha256:813979f1d3dd938e49874427651a97344cd1af5409e75aceaa741707616cd7a5"
    assert str(base_model_aggregate([(TWOS, 22), (ONES, 11)])) == expected
    assert str(base_model_aggregate([(ONES, 11), (TWOS, 22)])) == expected  # order-free
    assert str(base_model_aggregate([(ONES, 11), (TWOS, 23)])) != expected


def test_golden_grpo_corpus_digest() -> None:
    expected = "sha256:3f495e234c3946d423ff971d5ade7fc11e7139a5a24cd3ea35a36cba2c6bdeb3"
    assert str(grpo_corpus_digest([b'{"a":1}', b"[]"])) == expected
    assert str(grpo_corpus_digest([b"[]", b'{"a":1}'])) != expected
    assert str(grpo_corpus_digest([b'{"a":1}[]'])) != expected
    hasher = GrpoCorpusHasher()
    hasher.update(b'{"a":1}')
    assert hasher.count == 1
    hasher.update(b"[]")
    assert str(hasher.digest()) == expected
    assert str(hasher.digest()) == expected  # digest() does not consume the state


def test_grpo_rows_are_given_without_their_lf() -> None:
    with pytest.raises(KilnError) as caught:
        grpo_corpus_digest([b'{"a":1}\n'])
    assert code_of(caught) == "record_invalid"


# --- Sha256Digest ------------------------------------------------------------------------


def test_digest_parse_and_render() -> None:
    text = "sha256:" + "ab" * 32
    digest = Sha256Digest.parse(text)
    assert str(digest) == text
    assert digest.raw == bytes.fromhex("ab" * 32)
    assert Sha256Digest.from_raw(digest.raw) == digest
    assert sha256_bytes(b"abc") == Sha256Digest(hashlib.sha256(b"abc").hexdigest())


@pytest.mark.parametrize(
    "text",
    [
        "sha256:" + "AB" * 32,
        "sha256:" + "a" * 63,
        "sha256:" + "a" * 65,
        "sha256:" + "g" * 64,
        "SHA256:" + "a" * 64,
        "sha512:" + "a" * 64,
        "a" * 64,
        "sha256: " + "a" * 63,
        "sha256:" + "a" * 64 + "\n",
        "",
        None,
        64,
    ],
)
def test_digest_malformed(text: object) -> None:
    with pytest.raises(KilnError) as caught:
        Sha256Digest.parse(text)
    assert code_of(caught) == "digest_malformed"


def test_digest_from_raw_needs_32_bytes() -> None:
    with pytest.raises(KilnError) as caught:
        Sha256Digest.from_raw(b"\0" * 31)
    assert code_of(caught) == "digest_malformed"


# --- hash_file ---------------------------------------------------------------------------


def test_hash_file_cap_boundary(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    data = os.urandom(3 * 1024 * 1024 + 17)
    path.write_bytes(data)
    found = hash_file(path, max_bytes=len(data))
    assert found.sha256 == sha256_bytes(data)
    assert found.size_bytes == len(data)
    with pytest.raises(LimitExceeded) as caught:
        hash_file(path, max_bytes=len(data) - 1)
    assert caught.value.bound == len(data) - 1


def test_hash_file_refuses_symlink_directory_fifo_and_missing(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.mkfifo(tmp_path / "fifo")
    cases = {"link": "path_symlink", ".": "path_not_regular", "fifo": "path_not_regular"}
    cases["missing"] = "path_missing"
    for name, code in cases.items():
        with pytest.raises(KilnError) as caught:
            hash_file(tmp_path / name, max_bytes=10)
        assert code_of(caught) == code, name


def test_hash_file_counts_bytes_read_not_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that grows after fstat is still bounded by what is actually read."""
    from kiln_verify.core import digest

    path = tmp_path / "grow.bin"
    path.write_bytes(b"a" * 10)
    real_fstat = os.fstat

    class Shrunk:
        def __init__(self, result: os.stat_result) -> None:
            self.st_size = 1
            self.st_mode = result.st_mode

    monkeypatch.setattr(os, "fstat", lambda fd: Shrunk(real_fstat(fd)))
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(LimitExceeded) as caught:
            digest.hash_fd(fd, max_bytes=5, shown="grow.bin")
        assert caught.value.observed == 6  # read stops at cap + 1
    finally:
        os.close(fd)


# --- artifact paths (§5.2) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["a", "a/b.json", "input_adapter/adapter_config.json", "é/ü", "a.b/.c/..d", "x" * 512],
)
def test_valid_relative_paths(path: str) -> None:
    assert "/".join(validate_relative_path(path)) == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/abs",
        "a//b",
        "a/",
        "./a",
        "a/./b",
        "../a",
        "a/..",
        "a\\b",
        "a\nb",
        "a\x00b",
        "a\x7fb",
        "a\x85b",
        "\ud800",
        "x" * 513,
        "é" * 257,
    ],
)
def test_invalid_relative_paths(path: str) -> None:
    with pytest.raises(KilnError) as caught:
        validate_relative_path(path)
    assert code_of(caught) == "path_invalid"


def test_relative_path_byte_boundary_counts_utf8() -> None:
    validate_relative_path("é" * (MAX_ARTIFACT_PATH_BYTES // 2))
    validate_relative_path("é" * 255 + "ab")
    with pytest.raises(KilnError):
        validate_relative_path("é" * 255 + "abc")


# --- ArtifactIdentity --------------------------------------------------------------------


def test_identity_dict_round_trip() -> None:
    identity = ArtifactIdentity("a/b.bin", 3, ONES)
    data = identity.to_dict()
    assert data == {"relative_path": "a/b.bin", "size_bytes": 3, "sha256": str(ONES)}
    assert ArtifactIdentity.from_dict(data) == identity


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({"relative_path": "a", "size_bytes": 1}, "record_invalid"),
        ({"relative_path": "a", "size_bytes": 1, "sha256": str(ONES), "x": 1}, "record_invalid"),
        ({"relative_path": "a", "size_bytes": 0, "sha256": str(ONES)}, "record_invalid"),
        ({"relative_path": "a", "size_bytes": -1, "sha256": str(ONES)}, "record_invalid"),
        ({"relative_path": "a", "size_bytes": True, "sha256": str(ONES)}, "record_invalid"),
        ({"relative_path": "a", "size_bytes": 1.0, "sha256": str(ONES)}, "record_invalid"),
        ({"relative_path": "a", "size_bytes": "1", "sha256": str(ONES)}, "record_invalid"),
        ({"relative_path": "a", "size_bytes": 2**64, "sha256": str(ONES)}, "record_invalid"),
        ({"relative_path": 1, "size_bytes": 1, "sha256": str(ONES)}, "record_invalid"),
        ({"relative_path": "../a", "size_bytes": 1, "sha256": str(ONES)}, "path_invalid"),
        ({"relative_path": "a", "size_bytes": 1, "sha256": "sha256:XX"}, "digest_malformed"),
        ([], "record_invalid"),
    ],
)
def test_identity_from_dict_is_strict(data: object, code: str) -> None:
    with pytest.raises(KilnError) as caught:
        ArtifactIdentity.from_dict(data)
    assert code_of(caught) == code


# --- identify / verify -------------------------------------------------------------------


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "top.bin").write_bytes(b"top")
    (root / "sub" / "deeper" / "leaf.bin").write_bytes(b"leaf bytes")
    return root


def test_identify_and_verify(bundle: Path) -> None:
    identity = identify(bundle, "sub/deeper/leaf.bin", max_bytes=100)
    assert identity == ArtifactIdentity("sub/deeper/leaf.bin", 10, sha256_bytes(b"leaf bytes"))
    verify(bundle, identity)
    verify(bundle, identify(bundle, "top.bin", max_bytes=3))


def test_identify_cap_boundary(bundle: Path) -> None:
    identify(bundle, "top.bin", max_bytes=3)
    with pytest.raises(LimitExceeded):
        identify(bundle, "top.bin", max_bytes=2)


def test_verify_detects_size_and_digest_changes(bundle: Path) -> None:
    identity = identify(bundle, "top.bin", max_bytes=100)
    (bundle / "top.bin").write_bytes(b"toq")
    with pytest.raises(KilnError) as caught:
        verify(bundle, identity)
    assert code_of(caught) == "digest_mismatch"
    (bundle / "top.bin").write_bytes(b"top!")
    with pytest.raises(KilnError) as caught:
        verify(bundle, identity)
    assert code_of(caught) == "size_mismatch"
    assert "top.bin" in str(caught.value)


def test_empty_files_have_no_identity(bundle: Path) -> None:
    (bundle / "empty").write_bytes(b"")
    with pytest.raises(KilnError) as caught:
        identify(bundle, "empty", max_bytes=10)
    assert code_of(caught) == "record_invalid"


def test_symlinks_are_refused_at_every_level(bundle: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "deeper" / "leaf.bin").write_bytes(b"leaf bytes")
    (bundle / "linkdir").symlink_to(outside)
    (bundle / "sub" / "linkdeeper").symlink_to(outside / "deeper")
    (bundle / "sub" / "deeper" / "linkleaf").symlink_to(bundle / "top.bin")
    (bundle / "dangling").symlink_to(tmp_path / "nowhere")
    for relative in (
        "linkdir/deeper/leaf.bin",
        "sub/linkdeeper/leaf.bin",
        "sub/deeper/linkleaf",
        "dangling",
    ):
        with pytest.raises(KilnError) as caught:
            identify(bundle, relative, max_bytes=100)
        assert code_of(caught) == "path_symlink", relative
    with pytest.raises(KilnError) as caught:
        verify(bundle, ArtifactIdentity("sub/deeper/linkleaf", 3, sha256_bytes(b"top")))
    assert code_of(caught) == "path_symlink"


def test_parents_must_be_directories_and_leaf_regular(bundle: Path) -> None:
    os.mkfifo(bundle / "fifo")
    cases = {
        "top.bin/x": "path_not_directory",
        "sub": "path_not_regular",
        "sub/deeper": "path_not_regular",
        "fifo": "path_not_regular",
        "nope.bin": "path_missing",
        "nope/leaf.bin": "path_missing",
        "../bundle/top.bin": "path_invalid",
    }
    for relative, code in cases.items():
        with pytest.raises(KilnError) as caught:
            identify(bundle, relative, max_bytes=100)
        assert code_of(caught) == code, relative


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(KilnError) as caught:
        identify(tmp_path / "none", "a", max_bytes=1)
    assert code_of(caught) == "path_missing"
