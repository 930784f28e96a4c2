"""The plugin's settings and the endpoints they name, shared by the hooks and the fixtures.

The hooks (:mod:`pytest_kiln.plugin`) fill the settings from the command line and the ini
file; the fixtures (:mod:`pytest_kiln.fixtures`) read them. Both import this module and
neither imports the other's, so the plugin's import graph has no cycle. Like the plugin
module, it imports only pytest and the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_kiln.report import RecordedResult

__all__ = ["SETTINGS_KEY", "EndpointSpec", "KilnSettings", "kiln_settings"]


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """An endpoint under test before it runs: a URL, or an oracle server to start."""

    id: str
    url: str | None = None
    oracle: str | None = None
    max_sessions: int | None = None
    faults: tuple[str, ...] = ()
    #: Started per test (a marker) rather than shared by the session (``--kiln-oracle``).
    per_test: bool = False

    @classmethod
    def for_oracle(
        cls,
        name: str,
        *,
        max_sessions: int | None = None,
        faults: Sequence[str] = (),
        per_test: bool = False,
    ) -> EndpointSpec:
        label = "oracle-" + name
        if max_sessions is not None:
            label += f"-max{max_sessions}"
        for fault in faults:
            label += "+" + fault
        return cls(label, None, name, max_sessions, tuple(faults), per_test)


@dataclass(slots=True)
class KilnSettings:
    """The effective configuration and the results recorded so far."""

    urls: list[str] = field(default_factory=list)
    oracles: list[str] = field(default_factory=list)
    credential_env: str | None = None
    report_path: str | None = None
    report_html_path: str | None = None
    report_overwrite: bool = False
    #: ``--kiln-capacity-probe``; ``None`` means the suite's default.
    capacity_probe: int | None = None
    results: list[RecordedResult] = field(default_factory=list)
    report_error: str | None = None

    @property
    def endpoints(self) -> list[EndpointSpec]:
        specs = [EndpointSpec(url, url=url) for url in self.urls]
        specs += [EndpointSpec.for_oracle(name) for name in self.oracles]
        return specs


SETTINGS_KEY: pytest.StashKey[KilnSettings] = pytest.StashKey()


def kiln_settings(config: pytest.Config) -> KilnSettings:
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        settings = KilnSettings()
        config.stash[SETTINGS_KEY] = settings
    return settings
