"""The error hierarchy: stable codes, bounded messages, JSON-ready reports."""

from __future__ import annotations

import re

import pytest

from kiln_verify import errors
from kiln_verify.errors import (
    ERROR_CLASSES,
    ERROR_CODES,
    DigestError,
    JsonDuplicateKey,
    JsonError,
    KilnError,
    LimitExceeded,
    PathInvalid,
    PublishError,
    UsageError,
    snippet,
)
from kiln_verify.limits import MAX_ERROR_SNIPPET_CHARS

REQUIRED = {
    "usage",
    "limit_exceeded",
    "json_syntax",
    "json_duplicate_key",
    "json_non_finite",
    "json_invalid_utf8",
    "json_lone_surrogate",
    "json_too_deep",
    "json_not_object",
    "digest_malformed",
    "digest_mismatch",
    "size_mismatch",
    "path_invalid",
    "path_symlink",
    "path_not_regular",
    "target_exists",
    "publish_failed",
    "symlink_refused",
}


def _all_subclasses(cls: type[KilnError]) -> list[type[KilnError]]:
    found = []
    for sub in cls.__subclasses__():
        if not sub.__module__.startswith(f"{errors.__name__}."):
            continue  # classes this file tries (and fails) to define
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found


def test_codes_are_lowercase_unique_and_complete() -> None:
    concrete = [cls for cls in _all_subclasses(KilnError) if not cls._abstract]
    codes = [cls.code for cls in concrete]
    assert len(codes) == len(set(codes))
    assert set(codes) == ERROR_CODES == set(ERROR_CLASSES)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", code) for code in codes)
    assert REQUIRED <= ERROR_CODES
    for code, cls in ERROR_CLASSES.items():
        assert cls.code == code


def test_every_error_class_is_defined_in_the_errors_package() -> None:
    names: tuple[str, ...] = ("base", "control", "data", "openenv", "engines", "hf", "trl")
    names += ("training", "runcheck")
    names += ("hf_import_http",)
    families = {f"{errors.__name__}.{name}" for name in names}
    for cls in ERROR_CLASSES.values():
        assert cls.__module__ in families
        assert getattr(errors, cls.__name__) is cls  # importable from kiln_verify.errors


def test_families_group_codes() -> None:
    assert issubclass(ERROR_CLASSES["json_duplicate_key"], JsonError)
    assert issubclass(ERROR_CLASSES["digest_mismatch"], DigestError)
    assert issubclass(ERROR_CLASSES["target_exists"], PublishError)


def test_abstract_family_cannot_be_raised() -> None:
    with pytest.raises(TypeError):
        JsonError("x")


def test_bad_or_duplicate_code_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError):

        class Upper(KilnError):
            code = "Bad-Code"

    with pytest.raises(TypeError):

        class Twice(KilnError):
            code = "json_syntax"

    with pytest.raises(TypeError):

        class Missing(KilnError):
            pass

    assert ERROR_CLASSES["json_syntax"].__name__ == "JsonSyntax"


def test_message_names_rule_location_and_fix() -> None:
    error = PathInvalid("artifact path is absolute", path="bundle/x.json", line=3, hint="fix it")
    text = str(error)
    assert text.startswith("path_invalid: artifact path is absolute")
    assert "bundle/x.json" in text
    assert "line 3" in text
    assert text.endswith("(fix: fix it)")
    assert error.to_dict() == {
        "code": "path_invalid",
        "rule": "artifact path is absolute",
        "path": "bundle/x.json",
        "line": 3,
        "hint": "fix it",
    }


def test_default_hint_and_omitted_fields() -> None:
    error = JsonDuplicateKey("duplicate object key 'a'")
    assert error.hint is not None
    assert error.to_dict() == {
        "code": "json_duplicate_key",
        "rule": "duplicate object key 'a'",
        "hint": error.hint,
    }


def test_limit_exceeded_carries_limit_and_bound() -> None:
    error = LimitExceeded("JSONL line", limit="MAX_GRPO_ROW_BYTES", bound=10, observed=11)
    assert error.code == "limit_exceeded"
    assert "MAX_GRPO_ROW_BYTES = 10" in str(error)
    report = error.to_dict()
    assert report["limit"] == "MAX_GRPO_ROW_BYTES"
    assert report["bound"] == 10
    assert report["observed"] == 11


def test_exit_codes() -> None:
    assert UsageError("bad flag").exit_code == 2
    assert PathInvalid("x").exit_code == 1


def test_snippet_boundary() -> None:
    exact = "a" * MAX_ERROR_SNIPPET_CHARS
    assert snippet(exact) == repr(exact)
    over = "a" * (MAX_ERROR_SNIPPET_CHARS + 1)
    cut = snippet(over)
    assert cut.startswith(repr(exact))
    assert "81 chars" in cut


def test_snippet_neutralizes_control_characters() -> None:
    assert "\x1b" not in snippet("\x1b[31mred")


def test_peer_payload_never_floods_a_message() -> None:
    error = JsonDuplicateKey(f"duplicate object key {snippet('k' * 1_000_000)}", path="p" * 10_000)
    assert len(str(error)) < 600
