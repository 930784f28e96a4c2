"""Live oracle servers for the client tests, started in-process on free loopback ports.

Well-behaved servers are shared per session; fault servers are started per test through
the `start` factory (the plugin's `openenv_oracle`, tests/conftest.py) and stopped
afterwards, so no fault leaks into another test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oracle.runner import ServerHandle, start_servers


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, ServerHandle]]:
    handles = start_servers(["counter", "bandit", "measure"])
    yield {handle.name: handle for handle in handles}
    for handle in handles:
        handle.stop()
