"""The OpenEnv conformance suite as pytest tests: one test per endpoint and case id.

Run it against any server::

    pytest -p kiln --kiln-openenv-url http://127.0.0.1:8000 --pyargs pytest_kiln.conformance
    pytest -p kiln --kiln-oracle bandit --pyargs pytest_kiln.conformance --kiln-report r.json

A failed MUST fails the test; a failed SHOULD passes with verdict NON-STRICT in the report
and the terminal summary; a case that cannot be probed is skipped (verdict SKIPPED).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_kiln.cases import CASES, Case, Verdict, run_case
from pytest_kiln.fixtures import Endpoint


@pytest.mark.parametrize("kiln_case", CASES, ids=[case.id for case in CASES])
def test_conformance(
    openenv_endpoint: Endpoint, kiln_case: Case, kiln_record: Any, kiln_credential_env: str | None,
    kiln_capacity_probe: int | None,
) -> None:
    probe = {} if kiln_capacity_probe is None else {"capacity_probe": kiln_capacity_probe}
    result = run_case(kiln_case, openenv_endpoint.url, credential_env=kiln_credential_env,
                      **probe)
    kiln_record(openenv_endpoint, result)
    where = f"{kiln_case.id} [{kiln_case.level.value}, {kiln_case.clause}]"
    if result.verdict is Verdict.FAILED:
        pytest.fail(f"{where}: FAILED: {result.detail}", pytrace=False)
    if result.verdict is Verdict.SKIPPED:
        pytest.skip(f"{where}: not applicable: {result.detail}")
