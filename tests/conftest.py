"""Fixtures every test folder shares.

Live oracle servers come from the plugin's own ``openenv_oracle`` factory (``pytest -p
kiln``, loaded through the ``pytest11`` entry point), so the suite starts and stops them
exactly as a user's tests do; ``start`` is that factory under the short name the live-server
tests use (``start("bandit", faults=[...], max_sessions=1, port=...)``).
"""

from __future__ import annotations

import pytest

from pytest_kiln.fixtures import OracleFactory


@pytest.fixture
def start(openenv_oracle: OracleFactory) -> OracleFactory:
    """The plugin's ``openenv_oracle``: every server it started is stopped after the test."""
    return openenv_oracle
