"""Errors of the byte layer: strict JSON, records, digests, paths and publication."""

from __future__ import annotations

from kiln_verify.errors.base import KilnError

# --- JSON -------------------------------------------------------------------------------


class JsonError(KilnError, abstract=True):
    """The bytes are not strict JSON (see docs/byte-rules.md)."""

    default_hint = "produce strict RFC 8259 JSON encoded as UTF-8"


class JsonSyntax(JsonError):
    code = "json_syntax"


class JsonDuplicateKey(JsonError):
    code = "json_duplicate_key"
    default_hint = "every key may appear only once per object"


class JsonNonFinite(JsonError):
    code = "json_non_finite"
    default_hint = "NaN and infinities have no JSON spelling; send a finite number or null"


class JsonInvalidUtf8(JsonError):
    code = "json_invalid_utf8"
    default_hint = "re-encode the file as UTF-8 (without a byte order mark)"


class JsonLoneSurrogate(JsonError):
    code = "json_lone_surrogate"
    default_hint = "UTF-16 surrogates must come in high/low pairs"


class JsonTooDeep(JsonError):
    code = "json_too_deep"
    default_hint = "flatten the document; see MAX_JSON_DEPTH in docs/byte-rules.md"


class JsonNumberTooLong(JsonError):
    code = "json_number_too_long"
    default_hint = "numbers longer than MAX_JSON_NUMBER_CHARS are refused; send them as strings"


class JsonNotObject(JsonError):
    code = "json_not_object"
    default_hint = "the document must be a single JSON object"


class JsonUnsupportedType(JsonError):
    code = "json_unsupported_type"
    default_hint = "only dict (with str keys), list, tuple, str, int, float, bool and None encode"


class JsonlBlankLine(JsonError):
    code = "jsonl_blank_line"
    default_hint = "remove empty lines; every line holds exactly one JSON value"


class JsonlMissingNewline(JsonError):
    code = "jsonl_missing_newline"
    default_hint = "every line, the last one included, ends with a single LF"


# --- records ----------------------------------------------------------------------------


class RecordInvalid(KilnError):
    """A well-formed JSON value does not have the shape its record type requires."""

    code = "record_invalid"
    default_hint = "regenerate the document with a writer for this record version"


class SafetensorsInvalid(KilnError):
    """A safetensors file's header is not a well-formed, self-consistent tensor index."""

    code = "safetensors_invalid"
    default_hint = (
        "the file is not a valid safetensors file; re-save it with the safetensors library"
    )


class RecordSchemaUnsupported(KilnError):
    """A record's ``schema`` string names a record type or version we do not read."""

    code = "record_schema_unsupported"
    default_hint = "check that the file is the right kind of record and was written by Kiln"


class SummaryVersionUnsupported(KilnError):
    """A rollout summary's ``schema`` is not one of v2..v5 (v1 and unknown versions)."""

    code = "summary_version_unsupported"
    default_hint = "recollect with a current writer; only rollout-summary v2..v5 are verifiable"


class SummaryVersionConflict(KilnError):
    """A rollout summary carries (or lacks) a field its version forbids (or requires)."""

    code = "summary_version_conflict"
    default_hint = "the receipt mixes fields of different summary versions; regenerate it"


# --- digests ----------------------------------------------------------------------------


class DigestError(KilnError, abstract=True):
    """A content identity is malformed or does not match the bytes."""


class DigestMalformed(DigestError):
    code = "digest_malformed"
    default_hint = "write digests as 'sha256:' followed by 64 lowercase hex digits"


class DigestMismatch(DigestError):
    code = "digest_mismatch"
    default_hint = "the file changed after its digest was recorded; regenerate or restore it"


class SizeMismatch(DigestError):
    code = "size_mismatch"
    default_hint = "the file changed after its size was recorded; regenerate or restore it"


# --- paths and files --------------------------------------------------------------------


class PathRuleError(KilnError, abstract=True):
    """A path breaks the artifact path rules or does not resolve to what it must."""


class PathInvalid(PathRuleError):
    code = "path_invalid"
    default_hint = "use a relative '/'-separated path without '.', '..', empty parts or controls"


class PathSymlink(PathRuleError):
    code = "path_symlink"
    default_hint = "replace the symbolic link with the real file or directory"


class PathNotRegular(PathRuleError):
    code = "path_not_regular"
    default_hint = "the path must name a regular file"


class PathNotDirectory(PathRuleError):
    code = "path_not_directory"
    default_hint = "every parent component must be a real directory"


class PathMissing(PathRuleError):
    code = "path_missing"
    default_hint = "check the path; the file does not exist"


class FileAccessError(KilnError):
    """The operating system refused a read (permissions, I/O error)."""

    code = "io_failed"
    default_hint = "check that the file is readable by this user and the disk is healthy"


# --- publication ------------------------------------------------------------------------


class PublishError(KilnError, abstract=True):
    """An output could not be published atomically; nothing was left at the target."""


class TargetExists(PublishError):
    code = "target_exists"
    default_hint = "choose a new output path or remove the existing one first"


class PublishFailed(PublishError):
    code = "publish_failed"
    default_hint = "check that the parent directory exists, is writable and has free space"


class SymlinkRefused(PublishError):
    code = "symlink_refused"
    default_hint = "publish to a real directory; symbolic links are never followed"


# --- archives (kiln_verify.core.safe_tar) -----------------------------------------------


class ArchiveError(KilnError, abstract=True):
    """A ``.tar.gz`` archive is malformed or hostile; nothing was extracted (docs/byte-rules.md)."""


class ArchiveInvalid(ArchiveError):
    code = "archive_invalid"
    default_hint = (
        "the file is not a well-formed gzip-compressed POSIX USTAR archive; download or "
        "export it again"
    )


class ArchivePathUnsafe(ArchiveError):
    code = "archive_path_unsafe"
    default_hint = (
        "member names must be relative UTF-8 paths without '..', '.', empty parts, "
        "backslashes or control characters, within the name length limit"
    )


class ArchiveLink(ArchiveError):
    code = "archive_link"
    default_hint = "symbolic and hard links are never extracted; store the real file instead"


class ArchiveSpecialFile(ArchiveError):
    code = "archive_special_file"
    default_hint = "only regular files and directories may appear in an archive"


class ArchiveDuplicate(ArchiveError):
    code = "archive_duplicate"
    default_hint = (
        "every member name may appear once, also after case folding, and a name cannot be "
        "both a file and a directory"
    )


class ArchiveRootInvalid(ArchiveError):
    code = "archive_root_invalid"
    default_hint = "the archive must hold exactly one top-level directory, named as expected"


class ArchiveBomb(ArchiveError):
    code = "archive_bomb"
    default_hint = (
        "the archive exceeds an extraction budget (entries or bytes); see docs/byte-rules.md"
    )


class ArchiveTrailingData(ArchiveError):
    code = "archive_trailing_data"
    default_hint = (
        "the file must be exactly one gzip member holding one tar archive; remove appended "
        "members or bytes"
    )
