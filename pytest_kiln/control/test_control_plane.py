"""The control-plane conformance suite as pytest tests: one test per case id.

    pytest -p kiln --kiln-control-url http://127.0.0.1:8420 --pyargs pytest_kiln.control

A failed MUST fails the test; a failed SHOULD passes with verdict NON-STRICT in the report.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_kiln.cases.model import Verdict
from pytest_kiln.control.context import ControlTarget
from pytest_kiln.control.inventory import CONTROL_CASES, ControlCase
from pytest_kiln.control.runner import run_control_case
from pytest_kiln.fixtures import Endpoint


@pytest.mark.parametrize("control_case", CONTROL_CASES, ids=[case.id for case in CONTROL_CASES])
def test_control_plane(
    kiln_control: ControlTarget, control_case: ControlCase, kiln_record: Any
) -> None:
    result = run_control_case(control_case, kiln_control)
    kiln_record(Endpoint("control-plane", kiln_control.url), result)
    where = f"{control_case.id} [{control_case.level.value}, {control_case.clause}]"
    if result.verdict is Verdict.FAILED:
        pytest.fail(f"{where}: FAILED: {result.detail}", pytrace=False)
    if result.verdict is Verdict.SKIPPED:
        pytest.skip(f"{where}: not applicable: {result.detail}")
