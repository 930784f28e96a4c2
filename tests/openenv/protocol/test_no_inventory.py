"""Servers that predate `/list_environments` (404) against the oracle's `inventory-status` fault.

A 404 there is what openenv-core 0.3.0, openenv 0.3.1 and 0.4.0 answer: identity records
no advertised names, the discovery preimage holds `null`, `tasks` says `unsupported`, and
rollout, verify and replay work. Any other status keeps failing. The same rules against
a real openenv-core 0.3.0 server: `tests/interop/test_peer_pipeline.py`
(its `openenv-core-030` row).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import DiscoveryInvalid, EnvironmentHttpStatus, TaskApiInvalid
from kiln_verify.openenv.protocol.client import Inspection, OpenEnvClient
from kiln_verify.openenv.protocol.identity import (
    DiscoveryDocuments,
    build_identity,
    compare_identities,
)
from kiln_verify.openenv.protocol.tasks import TaskCatalog, task_catalog
from pytest_kiln.cases import CASES_BY_ID, Verdict, run_case
from tests.openenv.protocol.oekit import Start, canonical_sha256, run

runner = CliRunner()
NO_INVENTORY = "inventory-status=404"


async def _inspect(url: str) -> Inspection:
    async with OpenEnvClient(url) as client:
        return await client.inspect()


async def _catalog(url: str, **kwargs: object) -> TaskCatalog:
    async with OpenEnvClient(url) as client:
        return await task_catalog(client, **kwargs)  # type: ignore[arg-type]


def test_identity_lists_no_names_and_the_preimage_holds_null(start: Start) -> None:
    old = start("counter", faults=[NO_INVENTORY])
    new = start("counter")
    inspection = run(_inspect(old.base_url))
    identity = inspection.identity
    assert identity.environments == []
    assert inspection.documents.inventory_route is False
    raw = {path: httpx.get(old.base_url + path).json()
           for path in ("/metadata", "/schema", "/openapi.json")}
    assert identity.discovery_sha256 == canonical_sha256({
        "schema": "kiln.openenv-discovery.v1",
        "metadata": raw["/metadata"],
        "environment_schema": raw["/schema"],
        "environments": None,
        "openapi": raw["/openapi.json"],
    })
    assert run(_inspect(old.base_url)).identity == identity  # deterministic
    current = run(_inspect(new.base_url)).identity
    assert current.environments == ["counter_env"]
    assert current.schema_sha256 == identity.schema_sha256
    # the same game behind a server that gained the route: a different identity
    changed = compare_identities(identity, current.model_copy(update={"base_url": old.base_url,
                                                                      "websocket_url": old.ws_url}))
    assert changed == ["environments", "discovery_sha256"]


def test_no_route_and_an_empty_list_have_different_digests() -> None:
    schema: dict[str, dict[str, object]] = {"action": {}, "observation": {}, "state": {}}

    def identity(documents: DiscoveryDocuments) -> str | None:
        return build_identity(base_url="http://h", websocket_url="ws://h/ws",
                              authenticated=False, documents=documents).discovery_sha256

    absent = DiscoveryDocuments({"name": "E"}, schema, None, {}, inventory_route=False)
    empty = DiscoveryDocuments({"name": "E"}, schema, [], {})
    assert absent.preimage()["environments"] is None
    assert identity(absent) != identity(empty)
    with pytest.raises(DiscoveryInvalid, match="must be a JSON array of strings"):
        identity(DiscoveryDocuments({"name": "E"}, schema, None, {}))  # a 200 `null` body
    with pytest.raises(ValueError, match="no environments document"):
        DiscoveryDocuments({"name": "E"}, schema, [], {}, inventory_route=False)


def test_other_statuses_still_fail_inspection_and_tasks(start: Start) -> None:
    url = start("counter", faults=["inventory-status=500"]).base_url
    with pytest.raises(EnvironmentHttpStatus, match="/list_environments answered HTTP 500"):
        run(_inspect(url))
    with pytest.raises(EnvironmentHttpStatus, match="HTTP 500"):
        run(_catalog(url))
    for command in ("inspect", "tasks"):
        result = runner.invoke(app, ["openenv", command, "--environment", url, "--json"])
        assert result.exit_code == 1, result.output
        assert json.loads(result.stdout)["error"]["code"] == "environment_http_status"


def test_tasks_report_unsupported_under_the_metadata_name(start: Start) -> None:
    url = start("counter", faults=[NO_INVENTORY]).base_url
    expected = {"environment_name": "CounterEnvironment", "task_api": "unsupported",
                "splits": []}
    assert run(_catalog(url)).to_json() == expected
    assert run(_catalog(url, environment_name="counterenvironment")).to_json() == expected
    assert run(_catalog(url, split="train")).to_json() == expected  # nothing to page
    with pytest.raises(TaskApiInvalid, match="predates /list_environments and names itself"):
        run(_catalog(url, environment_name="counter_env"))
    result = runner.invoke(app, ["openenv", "tasks", "--environment", url, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == expected
    table = runner.invoke(app, ["openenv", "tasks", "--environment", url])
    assert table.exit_code == 0
    assert "environment CounterEnvironment: task API unsupported" in table.stdout


def test_inspect_cli(start: Start) -> None:
    url = start("counter", faults=[NO_INVENTORY]).base_url
    result = runner.invoke(app, ["openenv", "inspect", "--environment", url, "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["environments"] == []
    assert record == run(_inspect(url)).identity.to_json()
    table = runner.invoke(app, ["openenv", "inspect", "--environment", url])
    assert table.exit_code == 0
    assert "environments" in table.stdout


def test_rollout_verify_replay(start: Start, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    url = start("bandit", faults=[NO_INVENTORY]).base_url
    monkeypatch.chdir(tmp_path)
    rollout = runner.invoke(app, ["openenv", "rollout", "--environment", url, "--groups", "2",
                                  "--group-size", "2", "--max-steps", "3", "--json"])
    assert rollout.exit_code == 0, rollout.output
    summary = json.loads(Path("openenv.rollout-summary.json").read_text(encoding="utf-8"))
    identity = summary["environments"][0]["identity"]
    assert identity["environments"] == []
    assert identity["discovery_sha256"] == run(_inspect(url)).identity.discovery_sha256
    verify = runner.invoke(app, ["openenv", "verify", "--summary",
                                 "openenv.rollout-summary.json", "--json"])
    assert verify.exit_code == 0, verify.output
    replay = runner.invoke(app, ["openenv", "replay", "--summary",
                                 "openenv.rollout-summary.json", "--json"])
    assert replay.exit_code == 0, replay.output
    report = json.loads(replay.stdout)["report"]
    assert (report["groups"], report["rollouts"]) == (2, 4)


@pytest.mark.parametrize(
    ("status", "verdicts"),
    [
        (404, {"discovery.list-environments": Verdict.SKIPPED, "discovery.identity": Verdict.OK,
               "task-api.catalog-or-501": Verdict.OK}),
        # a SHOULD case that fails is NON-STRICT; the Task API case is a MUST
        (500, {"discovery.list-environments": Verdict.NON_STRICT,
               "discovery.identity": Verdict.NON_STRICT,
               "task-api.catalog-or-501": Verdict.FAILED}),
    ],
)
def test_the_suite_applies_the_same_rule(start: Start, status: int,
                                         verdicts: dict[str, Verdict]) -> None:
    url = start("counter", faults=[f"inventory-status={status}"]).base_url
    found = {case: run_case(CASES_BY_ID[case], url) for case in verdicts}
    assert {case: result.verdict for case, result in found.items()} == verdicts
    if status == 404:
        assert found["discovery.list-environments"].detail == (
            "no /list_environments (404): the server predates the route (OpenEnv before 0.5)"
        )
        assert found["discovery.identity"].detail.endswith(
            "; no /list_environments (404): no advertised names"
        )
        assert found["task-api.catalog-or-501"].detail == (
            "task_api unsupported, 0 splits (no /list_environments (404): the server predates "
            "the Task API)"
        )
