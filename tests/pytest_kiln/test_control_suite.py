"""`pytest -p kiln --kiln-control-url URL --pyargs pytest_kiln.control` end to end.

Against `kiln-verify serve` every case passes (the training cases are not applicable: that
server holds no resident model) and the report (same format as the OpenEnv suite's) says
so; against `kiln-verify serve --model DIR` the training cases pass; behind a proxy that
weakens the ETag, the artifact case fails.
"""

from __future__ import annotations

import json

import pytest

from kiln_verify.testing.serve import ServeProcess
from pytest_kiln.control.inventory import CONTROL_CASES
from pytest_kiln.report import REPORT_FORMAT
from tests import models
from tests.control.tamper import tamper_proxy

pytest_plugins = ["pytester"]

TRAINING = [case.id for case in CONTROL_CASES if case.id.startswith("training.")]
#: What a server without a resident model answers for the rest: model_not_loaded
NEEDS_MODEL = [case for case in TRAINING if case != "training.rollout-refuses-training-fields"]


def test_inventory_ids_are_stable() -> None:
    ids = [case.id for case in CONTROL_CASES]
    assert len(ids) == len(set(ids)) == 17
    for case in CONTROL_CASES:
        assert case.id == case.id.lower()
        assert case.id.count(".") == 1
        assert case.clause.startswith("docs/control-plane.md § ")


def test_the_suite_passes_against_kiln_verify_serve(
    pytester: pytest.Pytester, serve_process: ServeProcess
) -> None:
    report = pytester.path / "control-report.json"
    result = pytester.runpytest_inprocess(
        "-p",
        "kiln",
        "-p",
        "no:cacheprovider",
        "--kiln-control-url",
        serve_process.url,
        "--kiln-report",
        str(report),
        "--pyargs",
        "pytest_kiln.control",
    )
    passed = len(CONTROL_CASES) - len(NEEDS_MODEL)
    result.assert_outcomes(passed=passed, skipped=len(NEEDS_MODEL))
    result.stdout.fnmatch_lines([f"kiln conformance: {passed} OK, 0 NON-STRICT, 0 FAILED*"])
    document = json.loads(report.read_bytes())
    assert document["format"] == REPORT_FORMAT
    assert document["conforming"] is True
    assert {item["case"] for item in document["results"]} == {c.id for c in CONTROL_CASES}
    assert {item["endpoint"] for item in document["results"]} == {"control-plane"}


def test_the_training_cases_pass_against_a_server_with_a_resident_model(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    served = ServeProcess(
        tmp_path_factory.mktemp("serve-model") / "state",
        "--model",
        str(models.tiny_model(tmp_path_factory)),
    )
    try:
        result = pytester.runpytest_inprocess(
            "-p", "kiln", "-p", "no:cacheprovider", "--kiln-control-url", served.url,
            "--pyargs", "pytest_kiln.control", "-k", "training",
        )  # fmt: skip
    finally:
        assert served.stop() == 0
    result.assert_outcomes(passed=len(TRAINING))


def test_a_weak_etag_fails_the_artifact_case(
    pytester: pytest.Pytester, serve_process: ServeProcess
) -> None:
    with tamper_proxy(serve_process.url) as proxy:
        proxy.mode = "weak-etag"
        result = pytester.runpytest_inprocess(
            "-p",
            "kiln",
            "-p",
            "no:cacheprovider",
            "--kiln-control-url",
            proxy.url,
            "--pyargs",
            "pytest_kiln.control",
            "-k",
            "artifacts",
        )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*artifacts.headers*ETag*W/*strong quoted digest*"])


def test_without_a_url_the_suite_skips(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "kiln", "--pyargs", "pytest_kiln.control")
    result.assert_outcomes(skipped=len(CONTROL_CASES))
