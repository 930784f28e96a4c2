"""Options and fixtures of the control-plane suite (loaded by the ``kiln`` plugin).

- ``--kiln-control-url URL`` (ini ``kiln_control_url``): the control plane under test;
- ``--kiln-control-environment URL`` (ini ``kiln_control_environment``): an OpenEnv
  environment the server can reach; default: an in-process loopback oracle.

Only pytest and the standard library are imported here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_kiln.control.context import ControlTarget

URL_OPTION = "--kiln-control-url"
ENVIRONMENT_OPTION = "--kiln-control-environment"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kiln", "kiln OpenEnv conformance")
    group.addoption(
        URL_OPTION,
        dest="kiln_control_url",
        default=None,
        metavar="URL",
        help="Control plane under test (pytest_kiln.control).",
    )
    group.addoption(
        ENVIRONMENT_OPTION,
        dest="kiln_control_environment",
        default=None,
        metavar="URL",
        help="OpenEnv environment the control plane can reach "
        "(default: an in-process loopback oracle).",
    )
    parser.addini("kiln_control_url", "Control plane under test", default="")
    parser.addini("kiln_control_environment", "OpenEnv environment for control runs", default="")


def _option(config: pytest.Config, dest: str) -> str | None:
    value: Any = config.getoption(dest) or config.getini(dest)
    return str(value) if value else None


@pytest.fixture(scope="session")
def kiln_control(request: pytest.FixtureRequest) -> Iterator[ControlTarget]:
    """The control plane under test and the environments its runs use (session-wide)."""
    url = _option(request.config, "kiln_control_url")
    if url is None:
        pytest.skip(f"no control plane under test: pass {URL_OPTION} URL")
    from pytest_kiln.control.context import open_target

    with open_target(url, _option(request.config, "kiln_control_environment")) as target:
        yield target
