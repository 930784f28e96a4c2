"""Field types shared by the HF/TRL records (kiln-hf-trl-contract §4, §5.2).

The records use the shared :class:`~kiln_verify.records.Record` base (closed, frozen,
struct-ordered, omitted-not-null optional fields, ``record_invalid`` with a JSON path).
This module adds what the HF/TRL documents need on top: the 512-byte bounded text, file
identities with the artifact path rules, fixed bundle paths, the document-version
pre-check and self-digest sealing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Final, Self

from pydantic import AfterValidator, Field, PlainValidator, StrictInt, WithJsonSchema

from kiln_verify.core.digest import ArtifactIdentity, Sha256Digest, self_digest
from kiln_verify.core.paths import validate_relative_path
from kiln_verify.errors import DigestMismatch, KilnError, RecordSchemaUnsupported
from kiln_verify.limits import MAX_ARTIFACT_PATH_BYTES, MAX_HF_TEXT_BYTES
from kiln_verify.records import Record, Sha256

__all__ = [
    "U32",
    "U64",
    "BoundedText",
    "FileIdentity",
    "SealedDocument",
    "Sha256",
    "bounded_text",
    "check_document_tag",
    "fixed_path",
]

U64_MAX: Final = 2**64 - 1
U64 = Annotated[StrictInt, Field(ge=0, le=U64_MAX)]
U32 = Annotated[StrictInt, Field(ge=0, le=2**32 - 1)]
PositiveU64 = Annotated[StrictInt, Field(ge=1, le=U64_MAX)]

_PLACEHOLDER: Final = "sha256:" + "0" * 64
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def bounded_text(value: Any, *, max_bytes: int = MAX_HF_TEXT_BYTES) -> str:
    """Kiln's bounded text: a non-empty trimmed string of at most ``max_bytes`` UTF-8 bytes
    without control characters. Raises ``ValueError`` (pydantic turns it into
    ``record_invalid``)."""
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if not value or value != value.strip():
        raise ValueError("must be non-empty and carry no surrounding whitespace")
    if len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ValueError(f"is longer than {max_bytes} UTF-8 bytes")
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


BoundedText = Annotated[
    str,
    PlainValidator(bounded_text),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_HF_TEXT_BYTES}),
]
"""1..512 UTF-8 bytes, trimmed, no control characters (kiln-hf-trl-contract §4.1, §7)."""


def _relative_path(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    try:
        validate_relative_path(value)
    except KilnError as exc:
        raise ValueError(f"breaks the artifact path rules: {exc.rule}") from None
    return value


RelativePath = Annotated[
    str,
    PlainValidator(_relative_path),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_ARTIFACT_PATH_BYTES}),
]


class FileIdentity(Record):
    """``{"relative_path", "size_bytes", "sha256"}`` of one bundle file (§5.2).

    The record form of :class:`kiln_verify.core.digest.ArtifactIdentity` (same rules:
    normalized relative path, size above zero, full lowercase digest); convert with
    :meth:`from_artifact` and :meth:`to_artifact`.
    """

    relative_path: RelativePath
    size_bytes: PositiveU64
    sha256: Sha256

    @classmethod
    def from_artifact(cls, identity: ArtifactIdentity) -> FileIdentity:
        return cls(
            relative_path=identity.relative_path,
            size_bytes=identity.size_bytes,
            sha256=str(identity.sha256),
        )

    def to_artifact(self) -> ArtifactIdentity:
        return ArtifactIdentity(
            self.relative_path, self.size_bytes, Sha256Digest.parse(self.sha256)
        )


def fixed_path(path: str) -> Callable[[FileIdentity], FileIdentity]:
    """After-validator: the identity must name exactly ``path`` (Kiln ``ensure_exact_path``)."""

    def check(identity: FileIdentity) -> FileIdentity:
        if identity.relative_path != path:
            raise ValueError(f"relative_path must be {path!r}")
        return identity

    return check


def at(path: str) -> Any:
    """``Annotated[FileIdentity, at("train.py")]``: a file identity with a fixed path."""
    return AfterValidator(fixed_path(path))


def check_document_tag(value: Any, expected: dict[str, Any], *, source: str | None) -> None:
    """Name a wrong document type or version as ``record_schema_unsupported``.

    Runs before shape validation so that a ``kiln.hf-trl-export.v2`` (or a
    ``schema_version`` 2) is reported as an unsupported version rather than a shape error.
    A missing tag is left to shape validation (``record_invalid``).
    """
    if not isinstance(value, dict):
        return
    for key, want in expected.items():
        if key in value and (value[key] != want or type(value[key]) is not type(want)):
            raise RecordSchemaUnsupported(
                f"{key} must be {want!r}; this reader supports only that version", path=source
            )


class SealedDocument(Record):
    """A manifest whose last field is its own canonical self-digest (§5.1)."""

    _digest_field: ClassVar[str]
    _document_tag: ClassVar[dict[str, Any]]

    @classmethod
    def create(cls, **fields: Any) -> Self:
        """Build the document from every other field and seal it (the writer's path)."""
        return cls(**{**fields, cls._digest_field: _PLACEHOLDER}).sealed()

    def compute_digest(self) -> Sha256Digest:
        """The canonical digest of every field except the digest field (omitted form)."""
        return self_digest(self.to_json(), self._digest_field)

    def sealed(self) -> Self:
        """A copy whose digest field holds :meth:`compute_digest`."""
        return self.model_copy(update={self._digest_field: str(self.compute_digest())})

    def check_digest(self, *, source: str | None = None) -> Self:
        """Raise ``digest_mismatch`` unless the recorded digest is the recomputed one."""
        recorded = getattr(self, self._digest_field)
        computed = self.compute_digest()
        if recorded != str(computed):
            raise DigestMismatch(
                f"{self._digest_field} is {recorded}, the document digests to {computed}",
                path=source,
            )
        return self
