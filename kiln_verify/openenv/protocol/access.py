"""How an engine reaches its environments: credentials, environment, capacity, concurrency.

Collection, live replay and evaluation all open one client per environment with a bearer
token read from a named variable (or none, a public server), wait a bounded time for a
free session slot, and run a bounded number of sessions at once. :class:`EnvironmentAccess`
is those four settings as one value: ``replay`` takes it whole, and a collection's
:class:`~kiln_verify.openenv.collect.controls.CollectionControls` (which records the
concurrency and the capacity wait in its summary, and checks them by the collector's
rules) hands out its own with :meth:`~kiln_verify.openenv.collect.controls.
CollectionControls.access`, so evaluate's two collections reach the servers the same way.

This module imports no network library (the client is imported when one is opened), so
the records and the episode machine may name it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kiln_verify.errors import UsageError
from kiln_verify.limits import MAX_CAPACITY_WAIT_S, MAX_CONCURRENCY

if TYPE_CHECKING:
    from kiln_verify.openenv.protocol.client import OpenEnvClient

__all__ = ["DEFAULT_CAPACITY_WAIT_S", "DEFAULT_CONCURRENCY", "EnvironmentAccess"]

DEFAULT_CONCURRENCY = 4
DEFAULT_CAPACITY_WAIT_S = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentAccess:
    """Credential slots, the variables they are read from, the capacity wait and the
    concurrency; checked on construction (``usage``, naming the command-line flags).

    ``credential_envs`` is empty (every environment public) or one slot per environment
    in environment order, ``None`` for a public one; how many environments there are is
    the engine's to check. ``environ`` is where the variables are read (default: the
    process environment)."""

    credential_envs: Sequence[str | None] = ()
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    capacity_wait_seconds: float = DEFAULT_CAPACITY_WAIT_S
    concurrency: int = DEFAULT_CONCURRENCY

    def __post_init__(self) -> None:
        object.__setattr__(self, "credential_envs", tuple(self.credential_envs))
        concurrency = self.concurrency
        if (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or not (1 <= concurrency <= MAX_CONCURRENCY)
        ):
            raise UsageError(f"--concurrency must be an integer in 1..{MAX_CONCURRENCY}")
        wait = self.capacity_wait_seconds
        if (
            isinstance(wait, bool)
            or not isinstance(wait, int | float)
            or not (0 <= wait <= MAX_CAPACITY_WAIT_S)
        ):
            raise UsageError(
                f"--capacity-wait-seconds must be a number in 0..{MAX_CAPACITY_WAIT_S:g}"
            )

    def slot(self, index: int) -> str | None:
        """The credential variable of environment ``index`` (``None``: public)."""
        return self.credential_envs[index] if self.credential_envs else None

    def client(self, index: int, url: str) -> OpenEnvClient:
        """A client for environment ``index`` at ``url``, with its credential slot."""
        from kiln_verify.openenv.protocol.client import OpenEnvClient

        return OpenEnvClient(url, credential_env=self.slot(index), environ=self.environ)
