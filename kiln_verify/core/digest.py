"""Content identities: ``sha256:<hex>`` digests, bounded file hashing, artifact identities.

Every hand-off in kiln-verify is proven by comparing digests, so a digest is parsed
strictly (one spelling only, lowercase) and every file is hashed through a bounded stream
that refuses symlinks and non-regular files: a hostile bundle can neither redirect a read
nor make us read more than the caller allowed. The digest preimages shared with Kiln
(canonical manifest digest, base-model aggregate, GRPO corpus digest) live here as pure
functions next to their golden vectors in the tests.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kiln_verify.core.jsonenc import dumps_canonical, parsed_text
from kiln_verify.core.paths import open_regular, open_regular_beneath, validate_relative_path
from kiln_verify.errors import (
    DigestMalformed,
    DigestMismatch,
    FileAccessError,
    LimitExceeded,
    RecordInvalid,
    SizeMismatch,
    snippet,
)
from kiln_verify.limits import HASH_CHUNK_BYTES

_HEX64 = re.compile(r"[0-9a-f]{64}")
_PREFIX = "sha256:"
_U64 = struct.Struct("<Q")
_U64_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Sha256Digest:
    """A SHA-256 digest; ``str()`` renders it ``sha256:<64 lowercase hex>``."""

    hex: str

    def __post_init__(self) -> None:
        if not isinstance(self.hex, str) or not _HEX64.fullmatch(self.hex):
            raise DigestMalformed(f"digest hex {snippet(self.hex)} is not 64 lowercase hex digits")

    @classmethod
    def parse(cls, text: object) -> Sha256Digest:
        """Accept exactly ``sha256:`` + 64 lowercase hex digits; nothing else is normalized."""
        if not isinstance(text, str) or not text.startswith(_PREFIX):
            raise DigestMalformed(f"digest {snippet(text)} does not start with 'sha256:'")
        return cls(text[len(_PREFIX) :])

    @classmethod
    def from_raw(cls, raw: bytes) -> Sha256Digest:
        if len(raw) != 32:
            raise DigestMalformed(f"a SHA-256 digest has 32 bytes, not {len(raw)}")
        return cls(raw.hex())

    @property
    def raw(self) -> bytes:
        return bytes.fromhex(self.hex)

    def __str__(self) -> str:
        return _PREFIX + self.hex


@dataclass(frozen=True, slots=True)
class FileDigest:
    """Digest and exact byte count of what was read."""

    sha256: Sha256Digest
    size_bytes: int


def sha256_bytes(data: bytes | bytearray | memoryview) -> Sha256Digest:
    return Sha256Digest(hashlib.sha256(data).hexdigest())


def canonical_digest(value: Any) -> Sha256Digest:
    """SHA-256 of the canonical JSON (recursively sorted keys, compact) of ``value``."""
    return sha256_bytes(dumps_canonical(value))


def parsed_digest(value: Any) -> Sha256Digest:
    """:func:`canonical_digest` of a value the strict parser produced (plain dicts with str
    keys, lists, bounded numbers; constants beside them), written through ``orjson``
    (:func:`~kiln_verify.core.jsonenc.parsed_text`): the same bytes, several times faster.
    Every inspection hashes the discovery documents, OpenAPI included, and a client
    re-inspects after each collection or recorded TRL step (docs/performance.md)."""
    return sha256_bytes(parsed_text(value, canonical=True).encode("utf-8"))


def self_digest(document: Mapping[str, Any], field: str) -> Sha256Digest:
    """Canonical manifest digest (kiln-hf-trl-contract §5.1): the document minus ``field``.

    Works both when writing (field absent) and when checking (field present).
    """
    return canonical_digest({key: value for key, value in document.items() if key != field})


def hash_fd(fd: int, *, max_bytes: int, shown: str) -> FileDigest:
    """Hash an open regular file, checking the size before and while reading.

    Reads at most ``max_bytes + 1`` bytes, so a file growing under us is caught without
    reading past the cap.
    """
    size = os.fstat(fd).st_size
    if size > max_bytes:
        raise LimitExceeded("file", limit="max_bytes", bound=max_bytes, observed=size, path=shown)
    hasher = hashlib.sha256()
    buffer = bytearray(min(HASH_CHUNK_BYTES, max_bytes + 1))
    view = memoryview(buffer)
    total = 0
    with open(fd, "rb", buffering=0, closefd=False) as stream:
        while True:
            want = min(len(buffer), max_bytes + 1 - total)
            try:
                count = stream.readinto(view[:want])
            except OSError as exc:
                raise FileAccessError(f"read failed: {exc.strerror}", path=shown) from None
            if not count:
                break
            total += count
            if total > max_bytes:
                raise LimitExceeded(
                    "file", limit="max_bytes", bound=max_bytes, observed=total, path=shown
                )
            hasher.update(view[:count])
    return FileDigest(Sha256Digest(hasher.hexdigest()), total)


def hash_file(path: str | os.PathLike[str], *, max_bytes: int) -> FileDigest:
    """Stream-hash a regular, non-symlink file of at most ``max_bytes`` bytes."""
    with open_regular(path) as fd:
        return hash_fd(fd, max_bytes=max_bytes, shown=os.fspath(path))


@dataclass(frozen=True, slots=True)
class ArtifactIdentity:
    """``{"relative_path", "size_bytes", "sha256"}`` of one bundle file (§5.2)."""

    relative_path: str
    size_bytes: int
    sha256: Sha256Digest

    def __post_init__(self) -> None:
        validate_relative_path(self.relative_path)
        if type(self.size_bytes) is not int or not 0 < self.size_bytes <= _U64_MAX:
            raise RecordInvalid(
                f"size_bytes of {snippet(self.relative_path)} must be a positive integer "
                "(empty files are not allowed in a bundle)"
            )
        if not isinstance(self.sha256, Sha256Digest):
            raise RecordInvalid("sha256 must be a Sha256Digest")

    def to_dict(self) -> dict[str, Any]:
        return {
            "relative_path": self.relative_path,
            "size_bytes": self.size_bytes,
            "sha256": str(self.sha256),
        }

    @classmethod
    def from_dict(cls, data: object) -> ArtifactIdentity:
        """Strict reader: exactly the three keys, exact types, no coercion."""
        if not isinstance(data, dict):
            raise RecordInvalid("an artifact identity must be a JSON object")
        keys = set(data)
        expected = {"relative_path", "size_bytes", "sha256"}
        if keys != expected:
            extra = sorted(map(str, keys - expected))
            missing = sorted(expected - keys)
            raise RecordInvalid(
                f"artifact identity fields: missing {missing}, unknown {snippet(extra)}"
            )
        if not isinstance(data["relative_path"], str):
            raise RecordInvalid("relative_path must be a string")
        return cls(data["relative_path"], data["size_bytes"], Sha256Digest.parse(data["sha256"]))


def identify(
    root: str | os.PathLike[str], relative_path: str, *, max_bytes: int
) -> ArtifactIdentity:
    """Resolve ``relative_path`` beneath ``root`` without following links and hash it."""
    with open_regular_beneath(root, relative_path) as fd:
        found = hash_fd(fd, max_bytes=max_bytes, shown=os.path.join(root, relative_path))
    if found.size_bytes == 0:
        raise RecordInvalid(
            "empty files are not allowed in a bundle", path=os.path.join(root, relative_path)
        )
    return ArtifactIdentity(relative_path, found.size_bytes, found.sha256)


def verify(root: str | os.PathLike[str], identity: ArtifactIdentity) -> None:
    """Check that ``root/identity.relative_path`` has exactly the recorded size and digest."""
    shown = os.path.join(root, identity.relative_path)
    with open_regular_beneath(root, identity.relative_path) as fd:
        size = os.fstat(fd).st_size
        if size != identity.size_bytes:
            raise SizeMismatch(f"file has {size} bytes, expected {identity.size_bytes}", path=shown)
        try:
            found = hash_fd(fd, max_bytes=identity.size_bytes, shown=shown)
        except LimitExceeded:
            raise SizeMismatch("file grew while it was being read", path=shown) from None
    if found.size_bytes != identity.size_bytes:
        raise SizeMismatch(
            f"file has {found.size_bytes} bytes, expected {identity.size_bytes}", path=shown
        )
    if found.sha256 != identity.sha256:
        raise DigestMismatch(f"content is {found.sha256}, expected {identity.sha256}", path=shown)


def base_model_aggregate(shards: Iterable[tuple[Sha256Digest, int]]) -> Sha256Digest:
    """``kiln.base-model-content.v1`` (kiln-hf-trl-contract §5.4).

    Records (raw digest, size) sorted by (digest bytes, size); SHA-256 over the tag, NUL,
    u64-LE count, then per record u64-LE size and the 32 digest bytes. Sorting makes the
    aggregate independent of shard file names and listing order.
    """
    records: list[tuple[bytes, int]] = []
    for digest, size in shards:
        if type(size) is not int or not 0 <= size <= _U64_MAX:
            raise RecordInvalid("shard size must be an integer in 0..2**64-1")
        records.append((digest.raw, size))
    records.sort()
    hasher = hashlib.sha256(b"kiln.base-model-content.v1\0")
    hasher.update(_U64.pack(len(records)))
    for raw, size in records:
        hasher.update(_U64.pack(size))
        hasher.update(raw)
    return Sha256Digest(hasher.hexdigest())


class GrpoCorpusHasher:
    """Streaming ``kiln.hf-trl-grpo-corpus.v1`` ordered corpus digest (§5.5).

    Each row contributes u64-LE index, u64-LE length and its canonical bytes (without the
    LF); the row count closes the preimage, so reordering, splitting or dropping rows all
    change the digest.
    """

    def __init__(self) -> None:
        self._hasher = hashlib.sha256(b"kiln.hf-trl-grpo-corpus.v1\0")
        self._count = 0

    def update(self, row: bytes) -> None:
        if b"\n" in row:
            raise RecordInvalid(f"GRPO corpus row {self._count} contains an LF")
        self._hasher.update(_U64.pack(self._count))
        self._hasher.update(_U64.pack(len(row)))
        self._hasher.update(row)
        self._count += 1

    @property
    def count(self) -> int:
        return self._count

    def digest(self) -> Sha256Digest:
        final = self._hasher.copy()
        final.update(_U64.pack(self._count))
        return Sha256Digest(final.hexdigest())


def grpo_corpus_digest(rows: Iterable[bytes]) -> Sha256Digest:
    hasher = GrpoCorpusHasher()
    for row in rows:
        hasher.update(row)
    return hasher.digest()
