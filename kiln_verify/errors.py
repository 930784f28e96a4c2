"""Typed errors with stable machine codes.

Every failure a user or a peer can cause surfaces as a :class:`KilnError` subclass. The
``code`` is the contract (reports, exit codes and tests match on it); the message is for
people and says which rule broke, where, and how to fix it. Messages never contain more
than :data:`~kiln_verify.limits.MAX_ERROR_SNIPPET_CHARS` characters of anything a peer
sent, so a hostile server or file cannot flood a terminal, a log or a JSON report.

Adding a code is adding one class here: ``__init_subclass__`` checks the spelling and
uniqueness at import time, and :data:`ERROR_CODES` / :data:`ERROR_CLASSES` are built from
the registry at the end of the module. All error classes live in this module so that the
list is complete without importing anything else.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from kiln_verify.limits import MAX_ERROR_SNIPPET_CHARS

_CODE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
_REGISTRY: dict[str, type[KilnError]] = {}


def snippet(value: object, limit: int = MAX_ERROR_SNIPPET_CHARS) -> str:
    """Render peer-supplied data for a message: ``repr``-quoted and cut to ``limit`` chars.

    ``repr`` keeps control characters and escape sequences from reaching a terminal raw.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        return repr(text[:limit]) + f"... ({len(text)} chars)"
    return repr(text)


class KilnError(Exception):
    """Root of every error kiln-verify reports on purpose.

    ``rule`` is a short statement of what was violated, ``path`` the file concerned,
    ``line`` a 1-based line within it and ``hint`` the fix. Abstract family classes
    (declared with ``abstract=True``) group codes and cannot be raised themselves.
    """

    code: ClassVar[str]
    default_hint: ClassVar[str | None] = None
    exit_code: ClassVar[int] = 1
    _abstract: ClassVar[bool] = True

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._abstract = abstract
        if abstract:
            return
        code = cls.__dict__.get("code")
        if not isinstance(code, str) or not _CODE_PATTERN.match(code):
            raise TypeError(f"{cls.__name__} needs a lowercase snake_case `code`")
        if code in _REGISTRY:
            raise TypeError(f"error code {code!r} is already used by {_REGISTRY[code].__name__}")
        _REGISTRY[code] = cls

    def __init__(
        self,
        rule: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        if type(self)._abstract:
            raise TypeError(f"{type(self).__name__} is abstract; raise a concrete subclass")
        self.rule = rule
        self.path = os.fspath(path) if path is not None else None
        self.line = line
        self.hint = hint if hint is not None else self.default_hint
        super().__init__(rule)

    def at(
        self, *, path: str | os.PathLike[str] | None = None, line: int | None = None
    ) -> KilnError:
        """Attach a location found by an outer layer (a JSONL reader knows the line)."""
        if path is not None:
            self.path = os.fspath(path)
        if line is not None:
            self.line = line
        return self

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f" in {snippet(self.path, 2 * MAX_ERROR_SNIPPET_CHARS)}"
        if self.line is not None:
            where += f" at line {self.line}"
        text = f"{self.code}: {self.rule}{where}"
        if self.hint:
            text += f" (fix: {self.hint})"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``--json`` reports; absent fields are omitted, not null."""
        out: dict[str, Any] = {"code": self.code, "rule": self.rule}
        if self.path is not None:
            out["path"] = self.path
        if self.line is not None:
            out["line"] = self.line
        if self.hint is not None:
            out["hint"] = self.hint
        return out


# --- usage ------------------------------------------------------------------------------


class UsageError(KilnError):
    """The command line or API call itself is wrong; exit status 2, not 1."""

    code = "usage"
    exit_code = 2


# --- limits -----------------------------------------------------------------------------


class LimitExceeded(KilnError):
    """A named bound from :mod:`kiln_verify.limits` (or a caller's cap) was exceeded."""

    code = "limit_exceeded"
    default_hint = "the input is larger than kiln-verify accepts; check that it is the right file"

    def __init__(
        self,
        what: str,
        *,
        limit: str,
        bound: int,
        observed: int | None = None,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.limit = limit
        self.bound = bound
        self.observed = observed
        seen = f" (got at least {observed})" if observed is not None else ""
        super().__init__(f"{what} exceeds {limit} = {bound}{seen}", path=path, line=line, hint=hint)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["limit"] = self.limit
        out["bound"] = self.bound
        if self.observed is not None:
            out["observed"] = self.observed
        return out


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


ERROR_CLASSES: Mapping[str, type[KilnError]] = MappingProxyType(dict(_REGISTRY))
"""Every concrete error class by code."""

ERROR_CODES: frozenset[str] = frozenset(ERROR_CLASSES)
"""Every machine code kiln-verify can report."""
