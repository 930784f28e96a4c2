"""A real openenv-core 0.3.0 server, the release before `/list_environments`, end to end.

openenv-core 0.3.0 cannot share the suite's environment (openenv 0.10.0 installs the same
module), so `legacy_openenv.py` builds it its own virtual environment from PyPI, once per
machine. The environment is 0.3.0's own `openenv init` template (its reset takes no seed
and gives every episode a fresh `uuid4()` id; one session), served by 0.3.0 as its README
says. Everything here runs with default options: `inspect` and `tasks` succeed with no
advertised names and `task_api: unsupported`, the conformance suite agrees with them, and
`rollout`, `verify` and `replay` work.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.interop.behaviour_kit import rows_by_endpoint, run_suite
from tests.interop.cli_pipeline import (
    Pipeline,
    expect_clean_replay,
    inspect_collect_verify_replay,
)
from tests.interop.legacy_openenv import openenv_core_030, python_of
from tests.interop.openenv_init_kit import generate, serve
from tests.openenv.protocol.oekit import canonical_sha256

#: The first run builds the 0.3.0 environment: about 50 s on an idle 2-core box, several
#: minutes when the box is busy.
pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(1800)]

NAME = "legacy_probe_env"
CLASS = "LegacyProbeEnvironment"
NOT_OK = {
    **{case: "SKIPPED" for case in (
        "mcp.tools-list", "mcp.tools-call", "mcp.tools-call-without-name",
        "mcp.tools-call-unknown", "mcp.ws-route", "mcp.step-list-tools", "mcp.step-call-tool",
    )},
    "post-done.frozen": "SKIPPED",  # the template never ends an episode
    # the route 0.3.0 lacks: SKIPPED, not failed
    "discovery.list-environments": "SKIPPED",
    # 0.3.0's template `reset(self)` takes no episode_id
    "ws.episode-id-echo": "INFORMATIONAL",
}


@pytest.fixture(scope="module")
def python() -> Path:
    return python_of(openenv_core_030())


@pytest.fixture(scope="module")
def package(python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(python, NAME, tmp_path_factory.mktemp("openenv-core-030"))


@pytest.fixture(scope="module")
def url(python: Path, package: Path) -> Iterator[str]:
    server = serve(python, package, label="openenv-core-030")
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def suite(url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    process, data = run_suite([url], tmp_path_factory.mktemp("suite") / "report.json")
    output = process.stdout[-6000:] + process.stderr[-2000:]
    assert process.returncode == 0, output
    assert data["conforming"] is True, output
    return rows_by_endpoint(data)[url]


@pytest.fixture(scope="module")
def pipeline(url: str, suite: dict[str, dict[str, Any]],
             tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    """Runs after the suite (both want the server's only session)."""
    return inspect_collect_verify_replay(url, tmp_path_factory.mktemp("cli"))


def test_the_server_is_openenv_core_030_without_the_inventory(python: Path, url: str) -> None:
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('openenv-core'))"],
        capture_output=True, text=True, check=True, timeout=60)
    assert version.stdout.strip() == "0.3.0"
    assert httpx.get(url + "/list_environments").status_code == 404
    assert httpx.get(url + f"/{NAME}/splits").status_code == 404
    assert "/list_environments" not in httpx.get(url + "/openapi.json").json()["paths"]


def test_inspect_records_no_advertised_names(pipeline: Pipeline, url: str) -> None:
    assert pipeline.inspect.returncode == 0, pipeline.inspect.explain()
    identity = pipeline.inspect.json()
    raw = {path: httpx.get(url + path).json()
           for path in ("/metadata", "/schema", "/openapi.json")}
    assert identity["environments"] == []
    assert identity["metadata"]["name"] == CLASS
    assert identity["schema_sha256"] == canonical_sha256(raw["/schema"])
    assert identity["discovery_sha256"] == canonical_sha256({
        "schema": "kiln.openenv-discovery.v1", "metadata": raw["/metadata"],
        "environment_schema": raw["/schema"], "environments": None,
        "openapi": raw["/openapi.json"]})


def test_tasks_are_unsupported(pipeline: Pipeline) -> None:
    assert pipeline.tasks.returncode == 0, pipeline.tasks.explain()
    assert pipeline.tasks.json() == {"environment_name": CLASS, "task_api": "unsupported",
                                     "splits": []}


def test_rollout_and_verify(pipeline: Pipeline) -> None:
    assert pipeline.rollout.returncode == 0, pipeline.rollout.explain()
    stats = pipeline.rollout.json()["stats"]
    assert (stats["max_steps_count"], stats["total_environment_steps"]) == (32, 256)
    assert (stats["invalid_model_action_count"], stats["protocol_error_count"]) == (0, 0)
    assert pipeline.verify.returncode == 0, pipeline.verify.explain()
    report = pipeline.verify.json()
    assert (report["groups"], report["rollouts"], report["environment_exchanges"]) == (8, 32, 256)


def test_replay_is_clean(pipeline: Pipeline) -> None:
    report, notes = expect_clean_replay(pipeline.replay)
    assert (report["groups"], report["rollouts"], report["environment_exchanges"]) == (8, 32, 256)
    assert notes["volatile"] == ["final_state.episode_id"]  # the uuid, by presence and type


def test_conformance_verdicts(suite: dict[str, dict[str, Any]]) -> None:
    found = {case: row["verdict"] for case, row in suite.items() if row["verdict"] != "OK"}
    assert found == NOT_OK, {case: suite[case]["detail"] for case in found}
    assert suite["discovery.list-environments"]["detail"] == (
        "no /list_environments (404): the server predates the route (OpenEnv before 0.5)")


def test_suite_and_cli_agree(suite: dict[str, dict[str, Any]], pipeline: Pipeline) -> None:
    identity = pipeline.inspect.json()
    assert suite["discovery.identity"]["detail"] == (
        f"schema_sha256 {identity['schema_sha256']}; no /list_environments (404): "
        "no advertised names")
    assert pipeline.tasks.json()["task_api"] == "unsupported"
    assert suite["task-api.catalog-or-501"]["detail"] == (
        "task_api unsupported, 0 splits (no /list_environments (404): the server predates "
        "the Task API)")
