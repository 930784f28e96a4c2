"""The Task API catalog and the `kiln-verify openenv` commands against live servers."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import TaskApiInvalid, UsageError
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.protocol.tasks import TaskCatalog, segment, task_catalog
from oracle.runner import ServerHandle
from tests.openenv.protocol.oekit import Start, run

SECRET = "kiln-cli-token-55aa"
runner = CliRunner()


async def _catalog(url: str, **kwargs: object) -> TaskCatalog:
    async with OpenEnvClient(url) as client:
        return await task_catalog(client, **kwargs)  # type: ignore[arg-type]


def test_math_catalog_splits_and_paging(servers: dict[str, ServerHandle]) -> None:
    url = servers["measure"].base_url
    splits = run(_catalog(url))
    assert splits.to_json() == {
        "environment_name": "measure_env",
        "task_api": "available",
        "splits": [
            {"name": "train", "type": "train"},
            {"name": "validation", "type": "validation"},
            {"name": "test", "type": "test"},
        ],
    }
    page = run(_catalog(url, environment_name="MEASURE_ENV", split="train", start=3, limit=4))
    assert (page.selected_split, page.start, page.stop) == ("train", 3, 7)
    expected = httpx.post(
        url + "/measure_env/task_range", json={"split": "train", "start": 3, "stop": 7}
    ).json()["tasks"]
    assert page.tasks == expected
    assert (
        page.num_tasks
        == httpx.post(url + "/measure_env/num_tasks", json={"split": "train"}).json()["num_tasks"]
    )
    assert page.num_tasks is not None
    tail = run(_catalog(url, split="train", start=page.num_tasks - 1, limit=200))
    assert tail.tasks is not None
    assert len(tail.tasks) == 1
    beyond = run(_catalog(url, split="train", start=page.num_tasks + 5))
    assert beyond.tasks == []


def test_bandit_has_no_task_api(servers: dict[str, ServerHandle]) -> None:
    catalog = run(_catalog(servers["bandit"].base_url))
    assert catalog.to_json() == {
        "environment_name": "bandit_env",
        "task_api": "unsupported",
        "splits": [],
    }


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"limit": 201}, UsageError),
        ({"limit": 0}, UsageError),
        ({"start": -1}, UsageError),
        ({"environment_name": ""}, UsageError),
        ({"environment_name": "other_env"}, TaskApiInvalid),
        ({"split": "nope"}, TaskApiInvalid),
    ],
)
def test_catalog_selection_errors(
    servers: dict[str, ServerHandle], kwargs: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        run(_catalog(servers["measure"].base_url, **kwargs))


def test_environment_name_is_one_path_segment() -> None:
    assert segment("a/b c?d#e%") == "a%2Fb%20c%3Fd%23e%25"
    assert segment("measure_env") == "measure_env"


# --- CLI -------------------------------------------------------------------------------------


def test_inspect_json_and_table(servers: dict[str, ServerHandle]) -> None:
    url = servers["counter"].base_url
    result = runner.invoke(app, ["openenv", "inspect", "--environment", url, "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["schema"] == "kiln.openenv-identity.v1"
    assert record["environments"] == ["counter_env"]
    table = runner.invoke(app, ["openenv", "inspect", "--environment", url])
    assert table.exit_code == 0
    assert "schema_sha256" in table.stdout
    assert record["schema_sha256"][:20] in table.stdout


def test_tasks_json_and_table(servers: dict[str, ServerHandle]) -> None:
    url = servers["measure"].base_url
    result = runner.invoke(
        app, ["openenv", "tasks", "--environment", url, "--split", "test", "--limit", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    catalog = json.loads(result.stdout)
    assert (catalog["selected_split"], catalog["start"], catalog["stop"]) == ("test", 0, 2)
    table = runner.invoke(app, ["openenv", "tasks", "--environment", url, "--split", "test"])
    assert table.exit_code == 0
    assert "available" in table.stdout
    assert "train" in table.stdout
    bandit = runner.invoke(app, ["openenv", "tasks", "--environment", servers["bandit"].base_url])
    assert bandit.exit_code == 0
    assert "unsupported" in bandit.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["openenv", "inspect"],
        ["openenv", "inspect", "--environment", "ftp://x"],
        ["openenv", "tasks", "--environment", "http://127.0.0.1:1", "--limit", "201"],
        ["openenv", "inspect", "--environment", "http://127.0.0.1:1", "--credential-env", "1X"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output


def test_protocol_failure_exits_1_without_the_token(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KILN_CLI_TOKEN", SECRET)
    handle = start("counter", faults=["require-bearer=KILN_CLI_TOKEN"])
    refused = runner.invoke(app, ["openenv", "inspect", "--environment", handle.base_url])
    assert refused.exit_code == 1
    assert "environment_http_status" in refused.output
    assert "401" in refused.output
    ok = runner.invoke(
        app,
        [
            "openenv",
            "inspect",
            "--environment",
            handle.base_url,
            "--credential-env",
            "KILN_CLI_TOKEN",
            "--json",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["authentication"] == "bearer"
    assert SECRET not in ok.output
    assert SECRET not in refused.output
    insecure = runner.invoke(
        app,
        [
            "openenv",
            "inspect",
            "--environment",
            "http://example.com",
            "--credential-env",
            "KILN_CLI_TOKEN",
        ],
    )
    assert insecure.exit_code == 2
    assert "credential_insecure" in insecure.output
    assert SECRET not in insecure.output
