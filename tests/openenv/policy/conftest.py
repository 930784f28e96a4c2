"""Fixtures shared by the policy tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli_command import one_click_command


@pytest.fixture(scope="module", autouse=True)
def _one_click_command() -> Iterator[None]:
    """The property tests here run ``kiln-verify`` once per example (tests/cli_command.py)."""
    yield from one_click_command()
