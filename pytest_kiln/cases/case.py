"""A conformance case: a stable id, a level and clause, and the check that judges it.

It lives apart from :mod:`.model` because a check is a function of a
:class:`~pytest_kiln.cases.context.CaseContext`, and the context itself builds on the
model's bounds and exceptions: with the case here, the model imports nothing of the
context and the package's import graph has no cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.model import Level

__all__ = ["Case", "Check"]

Check = Callable[[CaseContext], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Case:
    """One conformance case: ``id`` is stable and never reused for another requirement."""

    id: str
    level: Level
    clause: str
    requirement: str
    check: Check = field(repr=False)
