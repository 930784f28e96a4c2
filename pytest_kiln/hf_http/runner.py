"""Running an HF/TRL HTTP case: its outcome becomes a verdict by the case's level."""

from __future__ import annotations

from pytest_kiln.cases.model import CaseResult
from pytest_kiln.cases.outcome import run_checked
from pytest_kiln.hf_http.context import HfContext
from pytest_kiln.hf_http.inventory import HfCase

__all__ = ["run_hf_case"]


def run_hf_case(case: HfCase, url: str) -> CaseResult:
    return run_checked(case, HfContext(url))
