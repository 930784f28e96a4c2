"""Every bound is a named, positive, documented constant."""

from __future__ import annotations

import re
from pathlib import Path

from kiln_verify import limits

DOCS = Path(__file__).resolve().parents[2] / "docs"
UNITS = {"KiB", "MiB", "GiB"}


def _bounds() -> dict[str, int | float]:
    return {
        name: value
        for name, value in vars(limits).items()
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and name not in UNITS
    }


def test_bounds_are_positive_numbers() -> None:
    bounds = _bounds()
    assert len(bounds) >= 20
    for name, value in bounds.items():
        assert isinstance(value, int | float), name
        assert not isinstance(value, bool), name
        assert value > 0, name


def test_bound_names_say_what_they_bound() -> None:
    for name in _bounds():
        assert name.startswith(
            ("MAX_", "HASH_", "HTTP_", "KEEP_ALIVE_", "CAPACITY_BACKOFF_", "DEFAULT_",
             "POLICY_RETRY_", "PROGRESS_", "REPORT_", "TRL_")
        ), name


def test_every_bound_is_documented() -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in DOCS.glob("*.md"))
    missing = [name for name in _bounds() if f"`{name}`" not in text]
    assert not missing, f"document these limits in docs/: {missing}"


def test_reference_values() -> None:
    assert limits.MAX_JSON_DEPTH == 127
    assert limits.MAX_ARTIFACT_PATH_BYTES == 512
    assert limits.MAX_DISCOVERY_BODY_BYTES == 2 * 1024 * 1024
    assert limits.MAX_SERVER_FRAME_BYTES == 512 * 1024
    assert limits.MAX_CLIENT_FRAME_BYTES == 16 * 1024 * 1024
    assert limits.MAX_GRPO_ROW_BYTES == 256 * 1024 * 1024
    assert limits.MAX_RESET_OPTIONS_FILE_BYTES == 16 * 1024 * 1024 - 1024
