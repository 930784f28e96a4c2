"""The root error type, its code registry, and the two codes every layer uses (usage, limits).

Family modules (`data`, `openenv`, `engines`) subclass :class:`KilnError`; defining a
subclass registers its code, and :mod:`kiln_verify.errors` exposes the complete registry.
"""

from __future__ import annotations

import os
import re
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
    ``line`` a 1-based line within it and ``hint`` the fix; ``fields`` the contract fields
    (of a request or of the collection options) that the rule names. Abstract family classes
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
        fields: tuple[str, ...] = (),
    ) -> None:
        if type(self)._abstract:
            raise TypeError(f"{type(self).__name__} is abstract; raise a concrete subclass")
        self.rule = rule
        self.path = os.fspath(path) if path is not None else None
        self.line = line
        self.hint = hint if hint is not None else self.default_hint
        #: The contract fields the rule and hint name, each in backticks (`` `groups` ``):
        #: a front end shows them in its own terms (the CLI as flags, ``cli.output``).
        self.fields = fields
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


# --- interruption -----------------------------------------------------------------------


class Interrupted(KilnError):
    """A long command was stopped by SIGINT or SIGTERM; the rule says what was kept."""

    code = "interrupted"
    exit_code = 130


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
