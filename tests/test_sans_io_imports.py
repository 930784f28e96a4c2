"""The Sans-I/O pieces import no network library.

The episode machine (:mod:`kiln_verify.openenv.collect.machine`) and the wire codec
(:mod:`kiln_verify.openenv.protocol.wire`) are pure: bytes and records in, commands and
records out. Importing either must not load an HTTP or WebSocket client, so that code
which only drives or tests the machine (another transport, a recorded episode, a trainer
that runs episodes elsewhere) pays for none of it, and so that the machine cannot quietly
start depending on the client. Each import runs in a fresh interpreter: a module, once
imported, stays in ``sys.modules`` for the rest of the test session.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Network libraries (their top-level package) and the modules of ours that open sockets.
NETWORK = (
    "httpx",
    "httpcore",
    "h11",
    "h2",
    "anyio",
    "sniffio",
    "websockets",
    "ssl",
    "urllib3",
    "requests",
    "aiohttp",
    "kiln_verify.openenv.protocol.client",
    "kiln_verify.openenv.protocol.session",
    "kiln_verify.openenv.protocol.tasks",
)

_PROBE = """
import json, sys
import {module}
network = {network!r}
loaded = sorted(
    name for name in sys.modules
    if any(name == root or name.startswith(root + ".") for root in network)
)
print(json.dumps(loaded))
"""


def _loaded_by(module: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module, network=NETWORK)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "module",
    [
        "kiln_verify.openenv.collect.machine",
        "kiln_verify.openenv.protocol.wire",
    ],
)
def test_sans_io_module_imports_no_network_library(module: str) -> None:
    assert _loaded_by(module) == []


def test_the_probe_sees_a_network_import() -> None:
    """The same probe on the client itself lists what it loads (the test can fail)."""
    loaded = _loaded_by("kiln_verify.openenv.protocol.client")
    assert "httpx" in loaded
    assert "websockets" in loaded
    assert "kiln_verify.openenv.protocol.client" in loaded


def test_the_package_still_offers_the_collector() -> None:
    """The collector package resolves its names on first use, the network stack with them."""
    loaded = _loaded_by("kiln_verify.openenv.collect")
    assert loaded == []
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom kiln_verify.openenv.collect import run_collection, collect\n"
            "import kiln_verify.openenv.collect as c\n"
            "assert run_collection.__module__ == 'kiln_verify.openenv.collect.run'\n"
            "assert set(c.__all__) <= set(dir(c))\n"
            "print('httpx' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "True"
