"""`openenv init` end to end: OpenEnv 0.10.0's own template, served, driven with defaults.

`openenv init` (the `openenv` console script of the interop extra) writes a package nobody
here wrote: `create_app(...)` with one session (`max_concurrent_envs=1`), an action that
must carry a `message` string, an episode that never ends, and a fresh `uuid4()` episode
id per reset. It is served as its README says (`uvicorn server.app:app` from the package
directory) and every front end runs against it with default options: `inspect`, `tasks`,
the conformance suite, `rollout` (the random policy samples the required `message`),
`verify` and `replay`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv")

from tests.interop.behaviour_kit import rows_by_endpoint, run_suite
from tests.interop.cli_pipeline import (
    Pipeline,
    expect_clean_replay,
    inspect_collect_verify_replay,
)
from tests.interop.openenv_init_kit import generate, serve
from tests.openenv.protocol.oekit import canonical_sha256

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(900)]

NAME = "kiln_probe_env"
CLASS = "KilnProbeEnvironment"
#: Every verdict that is not OK (the template has no MCP tools and never ends an episode).
NOT_OK = {
    **{case: "SKIPPED" for case in (
        "mcp.tools-list", "mcp.tools-call", "mcp.tools-call-without-name",
        "mcp.tools-call-unknown", "mcp.ws-route", "mcp.step-list-tools", "mcp.step-call-tool",
    )},
    "post-done.frozen": "SKIPPED",
}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(Path(sys.executable), NAME, tmp_path_factory.mktemp("openenv-init"))


@pytest.fixture(scope="module")
def url(package: Path) -> Iterator[str]:
    server = serve(Path(sys.executable), package, label="openenv-init")
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


def test_the_template_is_the_one_described(package: Path, url: str) -> None:
    app = (package / "server" / "app.py").read_text(encoding="utf-8")
    environment = (package / "server" / f"{NAME}_environment.py").read_text(encoding="utf-8")
    assert "max_concurrent_envs=1" in app
    assert "str(uuid4())" in environment
    assert httpx.get(url + "/list_environments").json() == [NAME]
    action = httpx.get(url + "/schema").json()["action"]
    assert action["required"] == ["message"]


def test_inspect(pipeline: Pipeline, url: str) -> None:
    assert pipeline.inspect.returncode == 0, pipeline.inspect.explain()
    identity = pipeline.inspect.json()
    raw = {path: httpx.get(url + path).json()
           for path in ("/metadata", "/schema", "/list_environments", "/openapi.json")}
    assert identity["environments"] == [NAME]
    assert identity["metadata"]["name"] == CLASS
    assert identity["schema_sha256"] == canonical_sha256(raw["/schema"])
    assert identity["discovery_sha256"] == canonical_sha256({
        "schema": "kiln.openenv-discovery.v1", "metadata": raw["/metadata"],
        "environment_schema": raw["/schema"], "environments": raw["/list_environments"],
        "openapi": raw["/openapi.json"]})


def test_tasks(pipeline: Pipeline) -> None:
    assert pipeline.tasks.returncode == 0, pipeline.tasks.explain()
    assert pipeline.tasks.json() == {"environment_name": NAME, "task_api": "unsupported",
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
    assert suite["capacity.capacity-reached"]["detail"] == (
        "CAPACITY_REACHED at session 2 (1 admitted, max 1)")
    assert suite["determinism.fresh-session-same-seed"]["detail"] == (
        "volatile (compared by presence and type): episode_id")


def test_suite_and_cli_agree(suite: dict[str, dict[str, Any]], pipeline: Pipeline) -> None:
    identity = pipeline.inspect.json()
    assert suite["discovery.identity"]["detail"] == f"schema_sha256 {identity['schema_sha256']}"
    assert suite["task-api.catalog-or-501"]["detail"] == "task_api unsupported, 0 splits"
