"""The HF/TRL HTTP suite as pytest tests: one test per case id.

    pytest -p kiln --kiln-hf-url http://127.0.0.1:8420 --pyargs pytest_kiln.hf_http

A failed MUST fails the test; a case the server cannot be probed for is skipped.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_kiln.cases.model import Verdict
from pytest_kiln.fixtures import Endpoint
from pytest_kiln.hf_http.inventory import HF_CASES, HfCase
from pytest_kiln.hf_http.runner import run_hf_case


@pytest.mark.parametrize("hf_case", HF_CASES, ids=[case.id for case in HF_CASES])
def test_hf_http(kiln_hf_url: str, hf_case: HfCase, kiln_record: Any) -> None:
    result = run_hf_case(hf_case, kiln_hf_url)
    kiln_record(Endpoint("hf-http", kiln_hf_url), result)
    where = f"{hf_case.id} [{hf_case.level.value}, {hf_case.clause}]"
    if result.verdict is Verdict.FAILED:
        pytest.fail(f"{where}: FAILED: {result.detail}", pytrace=False)
    if result.verdict is Verdict.SKIPPED:
        pytest.skip(f"{where}: not applicable: {result.detail}")
