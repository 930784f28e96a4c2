"""The option and fixture of the HF/TRL HTTP suite (loaded by the ``kiln`` plugin).

- ``--kiln-hf-url URL`` (ini ``kiln_hf_url``): the server under test, one that claims
  Kiln's export registry and PEFT import routes (``kiln-verify serve --model DIR``).

Only pytest and the standard library are imported here.
"""

from __future__ import annotations

from typing import Any

import pytest

URL_OPTION = "--kiln-hf-url"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kiln", "kiln OpenEnv conformance")
    group.addoption(
        URL_OPTION,
        dest="kiln_hf_url",
        default=None,
        metavar="URL",
        help="Server under test for the HF/TRL export and import routes (pytest_kiln.hf_http).",
    )
    parser.addini("kiln_hf_url", "Server under test for the HF/TRL HTTP routes", default="")


@pytest.fixture(scope="session")
def kiln_hf_url(request: pytest.FixtureRequest) -> str:
    """The base URL under test; every case skips with the reason when none is given."""
    value: Any = request.config.getoption("kiln_hf_url") or request.config.getini("kiln_hf_url")
    if not value:
        pytest.skip(f"no HF/TRL HTTP server under test: pass {URL_OPTION} URL")
    return str(value).rstrip("/")
