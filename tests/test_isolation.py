"""The suite's own isolation: one test's in-process pytest run leaves the worker's libraries
as the next test needs them (issue 26: no test depends on another's order or leftovers).

pytester removes, after an in-process run, every module that run imported first. A library
that imports lazily and caches what it imported (httpx keeps httpcore's exception classes in a
table, built at its first request) then holds classes that a later import no longer makes:
``tests/conftest.py`` imports httpcore before any run for that reason.
"""

from __future__ import annotations

import socket

import httpx
import pytest

pytest_plugins = ["pytester"]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, never listened, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_refused_connection_maps_to_httpx_after_an_in_process_run(
    pytester: pytest.Pytester,
) -> None:
    port = _closed_port()
    pytester.makepyfile(
        f"""
        import httpx, pytest

        def test_refused():
            with pytest.raises(httpx.ConnectError):
                httpx.get("http://127.0.0.1:{port}/", timeout=5)
        """
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
