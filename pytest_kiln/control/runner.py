"""Running a control case: its outcome becomes a verdict by the case's level."""

from __future__ import annotations

from pytest_kiln.cases.model import CaseResult
from pytest_kiln.cases.outcome import run_checked
from pytest_kiln.control.context import ControlContext, ControlTarget
from pytest_kiln.control.inventory import ControlCase

__all__ = ["run_control_case"]


def run_control_case(case: ControlCase, target: ControlTarget) -> CaseResult:
    return run_checked(case, ControlContext(target))
