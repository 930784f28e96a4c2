"""`pytest -p kiln --kiln-hf-url URL --pyargs pytest_kiln.hf_http` end to end.

Against ``kiln-verify serve --model`` (in a thread, over the session's tiny model) every
case passes and the report says so; behind a proxy that drops the ETag the three header
cases fail; without a URL, or against a server without a resident model, every case
skips. The hostile corpus the import case sends is checked here against kiln-verify's own
extractor: each body breaks the rule it names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("jinja2")
pytest.importorskip("tokenizers")

from kiln_verify.core.safe_tar import extract_tar_gz
from kiln_verify.core.tar_contract import ArchiveLimits
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_IMPORT_ENTRIES, MAX_IMPORT_EXPANDED_BYTES
from kiln_verify.server.runner import ServerHandle
from pytest_kiln.hf_http.corpus import EXPECTED, hostile_bodies
from pytest_kiln.hf_http.inventory import HF_CASES
from pytest_kiln.report import REPORT_FORMAT
from tests import models
from tests.control.support import control_server, resident_config, running
from tests.pytest_kiln.hf_proxy import hf_proxy

pytest_plugins = ["pytester"]

SUITE = ("-p", "kiln", "-p", "no:cacheprovider", "--pyargs", "pytest_kiln.hf_http")
HEADER_CASES = ["exports.create-headers", "exports.detail-headers", "exports.download-headers"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    state = tmp_path_factory.mktemp("hf-suite") / "state"
    with running(resident_config(state, models.tiny_model(tmp_path_factory))) as handle:
        yield handle


def test_inventory_ids_are_stable() -> None:
    ids = [case.id for case in HF_CASES]
    assert len(ids) == len(set(ids)) == 10
    for case in HF_CASES:
        assert case.id == case.id.lower()
        assert case.id.split(".")[0] in ("exports", "imports")
        assert case.clause.startswith(("docs/hf-http-export.md § ", "docs/hf-http-import.md § "))


def test_each_hostile_body_breaks_the_rule_it_names(tmp_path: Path) -> None:
    limits = ArchiveLimits(
        max_entries=MAX_IMPORT_ENTRIES,
        max_expanded_bytes=MAX_IMPORT_EXPANDED_BYTES,
        max_member_bytes=MAX_IMPORT_EXPANDED_BYTES,
    )
    bodies = hostile_bodies("probe")
    assert sorted(bodies) == sorted(EXPECTED)
    for case, body in bodies.items():
        archive = tmp_path / f"{case}.tar.gz"
        archive.write_bytes(body)
        with pytest.raises(KilnError) as caught:
            extract_tar_gz(archive, tmp_path, expected_root="probe.kiln-hf-import", limits=limits)
        assert caught.value.code == EXPECTED[case], case
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{c}.tar.gz" for c in bodies)


def test_the_suite_passes_against_serve_with_a_resident_model(
    pytester: pytest.Pytester, server: ServerHandle
) -> None:
    report = pytester.path / "hf-report.json"
    result = pytester.runpytest_inprocess(
        "--kiln-hf-url", server.base_url, "--kiln-report", str(report), *SUITE
    )
    result.assert_outcomes(passed=len(HF_CASES))
    result.stdout.fnmatch_lines([f"kiln conformance: {len(HF_CASES)} OK, 0 NON-STRICT, 0 FAILED*"])
    document = json.loads(report.read_bytes())
    assert document["format"] == REPORT_FORMAT
    assert document["conforming"] is True
    assert [row["case"] for row in document["results"]] == sorted(c.id for c in HF_CASES)
    assert {row["endpoint"] for row in document["results"]} == {"hf-http"}
    (race,) = [row for row in document["results"] if row["case"].endswith("racing-download")]
    assert "arrived whole and verified" in race["detail"]
    # every export the suite created was deleted again
    import httpx

    listed = httpx.get(server.base_url + "/v1/train/hf/exports", trust_env=False).json()
    assert listed == {"data": []}


def test_a_server_that_drops_the_etag_fails_the_header_cases(
    pytester: pytest.Pytester, server: ServerHandle
) -> None:
    with hf_proxy(server.base_url, "drop-etag") as proxy:
        result = pytester.runpytest_inprocess(
            "--kiln-hf-url", proxy.url, "-k", "exports and headers", *SUITE
        )
    result.assert_outcomes(failed=len(HEADER_CASES))
    for case in HEADER_CASES:
        result.stdout.fnmatch_lines([f"*{case}*ETag [[][]], expected exactly one strong*"])


def test_without_a_url_every_case_skips(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(*SUITE, "-rs")
    result.assert_outcomes(skipped=len(HF_CASES))
    result.stdout.fnmatch_lines(["*no HF/TRL HTTP server under test: pass --kiln-hf-url URL*"])


def test_against_a_server_without_a_resident_model_every_case_skips(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    with control_server(tmp_path / "state") as bare:
        result = pytester.runpytest_inprocess("--kiln-hf-url", bare.base_url, *SUITE, "-rs")
    result.assert_outcomes(skipped=len(HF_CASES))
    result.stdout.fnmatch_lines(["*not applicable: the server holds no resident model*"])
