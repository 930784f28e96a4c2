"""The interop suite run by ``scripts/check_miniopenenv_interop.sh`` (contract §14.2, §14.3).

Every test here talks to servers the gate script launched and announced through the
``KILN_OPENENV_INTEROP_*`` variables; without ``KILN_OPENENV_INTEROP_COUNTER_URL`` the
whole suite is skipped, so a plain ``pytest`` run skips it
(``tests/scripts/test_check_miniopenenv_interop.py`` runs the gate itself; it must stay
outside this folder, or the gate's own run of ``tests/gate`` would start the gate again).
The suite only speaks the OpenEnv protocol: it never imports the oracle package, so it runs
unchanged against an external oracle checkout.
"""

from __future__ import annotations

import os

import pytest


def _single(name: str) -> str:
    value = os.environ.get(f"KILN_OPENENV_INTEROP_{name}_URL", "")
    if not value:
        pytest.fail(f"KILN_OPENENV_INTEROP_{name}_URL is not set (the gate script exports it)")
    return value


def _many(name: str) -> list[str]:
    value = os.environ.get(f"KILN_OPENENV_INTEROP_{name}_URLS", "")
    urls = [item for item in value.split(",") if item]
    if not urls:
        pytest.fail(f"KILN_OPENENV_INTEROP_{name}_URLS is not set (the gate script exports it)")
    return urls


@pytest.fixture
def counter_url() -> str:
    return _single("COUNTER")


@pytest.fixture
def bandit_url() -> str:
    return _single("BANDIT")


@pytest.fixture
def connect4_url() -> str:
    return _single("CONNECT4")


@pytest.fixture
def maze_url() -> str:
    return _single("MAZE")


@pytest.fixture
def wordle_url() -> str:
    return _single("WORDLE")


@pytest.fixture
def arcade_urls() -> list[str]:
    return _many("ARCADE")


@pytest.fixture
def exact_text_urls() -> list[str]:
    return _many("EXACT_TEXT")


@pytest.fixture
def all_urls(counter_url: str, arcade_urls: list[str]) -> list[str]:
    return [counter_url, *arcade_urls]
