"""The browser tests' Chromium (:mod:`kiln_verify.testing.browser`, shared with the
benchmarks) and the suite's rule for a machine without one."""

from __future__ import annotations

import os

import pytest

from kiln_verify.testing.browser import (
    Chromium,
    PageVisit,
    Tab,
    find_chromium,
    ink_fraction,
    png_pixels,
)

__all__ = [
    "Chromium",
    "PageVisit",
    "Tab",
    "find_chromium",
    "ink_fraction",
    "launch_or_skip",
    "png_pixels",
]


def launch_or_skip() -> Chromium:
    """A headless Chromium; the test is skipped (with the reason) where there is none,
    unless ``KILN_REQUIRE_BROWSER=1`` (CI), which turns the skip into a failure."""
    executable = find_chromium()
    if executable is None:
        if os.environ.get("KILN_REQUIRE_BROWSER") == "1":
            pytest.fail("KILN_REQUIRE_BROWSER=1 but no chromium executable is on PATH")
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    return Chromium(executable)
