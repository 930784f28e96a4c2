"""A server with a resident model: ``GET /v1/adapters``, verified installation, runs that
play an installed adapter, and every refusal (docs/resident-model.md).

One server per module (in a thread, real sockets) over the session-shared tiny model; the
adapter is the shared completed SFT bundle of the import tests (tests/hf/importer), so the
suite trains it once.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.resident.records import AdaptersResponse
from kiln_verify.control.resident.store import adapters_root, install_adapter
from kiln_verify.errors import (
    ApiAdapterExists,
    ApiAdapterImportFailed,
    ApiAdapterNameInvalid,
)
from kiln_verify.hf.importer import INSTALLED_FILES
from kiln_verify.records import validate_record
from kiln_verify.server.runner import ServerHandle
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import client_of, resident_config, running, small_request, wait_terminal

NAME = "sft-v1.a"

# Kiln's AdaptersResponse and AdapterDiskEntry (kiln-artifacts-v1.schema.json @40b8a45e):
# closed records, every key required.
KILN_RESPONSE = {
    "active_adapter",
    "active",
    "loaded_adapter",
    "loaded_adapter_identity",
    "loaded_adapters",
    "adapter_dir",
    "available",
    "available_adapters",
}
KILN_ENTRY = set(
    [
        "name",
        "has_config",
        "has_weights",
        "size_bytes",
        "modified_at",
        "files",
        "path",
        "status",
        "adapter_model_sha256",
        "adapter_model_size_bytes",
        "rank",
        "alpha",
        "alpha_over_rank",
        "target_modules",
        "base_model_name_or_path",
        "parent_adapter_metadata",
        "canary_status",
        "canary_failure_reason",
        "canary_warnings",
        "canary_checks",
        "canary_status_path",
        "adapter_manifest",
        "adapter_manifest_path",
        "adapter_manifest_error",
        "last_load_error",
        "error",
    ]
)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, completed: tuple[Path, Path]) -> ServerConfig:
    state = tmp_path_factory.mktemp("resident") / "state"
    return resident_config(state, completed[0])


@pytest.fixture(scope="module")
def server(config: ServerConfig) -> Iterator[ServerHandle]:
    with running(config) as handle:
        yield handle


@pytest.fixture(scope="module")
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    with client_of(server) as client:
        yield client


def listing(http: httpx.Client) -> dict[str, Any]:
    answer = http.get("/v1/adapters")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert set(body) == KILN_RESPONSE
    for entry in body["available"]:
        assert set(entry) == KILN_ENTRY
    assert body["available"] == body["available_adapters"]
    validate_record(AdaptersResponse, body)
    return body


def on_disk(config: ServerConfig) -> list[str]:
    root = adapters_root(config)
    return sorted(os.listdir(root)) if root.exists() else []


def test_an_empty_set_then_a_verified_install(
    completed: tuple[Path, Path], tmp_path: Path
) -> None:
    # A server of its own: the module's server holds whatever the other tests installed.
    config = resident_config(tmp_path / "state", completed[0])
    with running(config) as server, client_of(server) as http:
        _empty_then_installed(http, config, completed[1])


def _empty_then_installed(http: httpx.Client, config: ServerConfig, bundle: Path) -> None:
    empty = listing(http)
    assert empty["available"] == []
    assert empty["loaded_adapters"] == []
    assert empty["adapter_dir"] == str(adapters_root(config))
    assert empty["active_adapter"] is None
    assert empty["loaded_adapter_identity"] is None

    outcome = install_adapter(config, bundle=bundle, name=NAME)
    assert outcome.directory == adapters_root(config) / NAME
    (entry,) = listing(http)["available"]
    assert entry["name"] == NAME
    assert entry["status"] == "available"
    assert entry["error"] is None
    assert entry["has_config"]
    assert entry["has_weights"]
    assert entry["files"] == sorted(INSTALLED_FILES)
    assert entry["rank"] == 2
    assert entry["canary_status"] == "unknown"
    weights = adapters_root(config) / NAME / "adapter_model.safetensors"
    assert entry["adapter_model_size_bytes"] == weights.stat().st_size
    assert len(entry["adapter_model_sha256"]) == 64

    # the CLI names it as Kiln does: `adapters list`
    url = http.base_url.scheme + "://" + http.base_url.netloc.decode()
    shown = CliRunner().invoke(app, ["adapters", "list", "--url", url, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["available"][0]["name"] == NAME
    table = CliRunner().invoke(app, ["adapters", "list", "--url", url])
    assert table.exit_code == 0
    assert NAME in table.output


def test_a_duplicate_a_hostile_name_and_a_tampered_adapter_write_nothing(
    server: ServerHandle, config: ServerConfig, completed: tuple[Path, Path], tmp_path: Path
) -> None:
    # installs go to a serving server's state directory, which the server creates
    install_adapter_once(config, completed[1])
    before = on_disk(config)
    installed = (adapters_root(config) / NAME / "adapter_model.safetensors").read_bytes()
    with pytest.raises(ApiAdapterExists):
        install_adapter(config, bundle=completed[1], name=NAME)
    for hostile in ("../escape", ".hidden", "base", "a..b", "x/y"):
        with pytest.raises(ApiAdapterNameInvalid):
            install_adapter(config, bundle=completed[1], name=hostile)
    tampered = Path(shutil.copytree(completed[1], tmp_path / "sft_01.kiln-hf"))
    weights = tampered / "adapter" / "adapter_model.safetensors"
    if not weights.exists():
        weights = next(tampered.rglob("adapter_model.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ApiAdapterImportFailed) as caught:
        install_adapter(config, bundle=tampered, name="tampered")
    assert caught.value.cause is not None
    assert caught.value.http_status == 422
    assert caught.value.to_dict()["cause"] == caught.value.cause
    assert on_disk(config) == before  # no directory, no staging left behind
    assert (adapters_root(config) / NAME / "adapter_model.safetensors").read_bytes() == installed


def install_adapter_once(config: ServerConfig, bundle: Path) -> None:
    if not (adapters_root(config) / NAME).exists():
        install_adapter(config, bundle=bundle, name=NAME)


def _summary(http: httpx.Client, status: dict[str, Any]) -> dict[str, Any]:
    (url,) = [a["url"] for a in status["artifacts"] if a["kind"] == "summary"]
    answer = http.get(url)
    assert answer.status_code == 200
    summary: dict[str, Any] = answer.json()
    return summary


def _provenance(policy: Any, seed: int = 5) -> Any:
    from kiln_verify.openenv.policy.base import PolicyRequest

    request = PolicyRequest(
        messages=[{"role": "user", "content": "Pick an arm."}],
        action_schema={},
        generation_seed=seed,
        max_action_tokens=6,
        thinking=False,
    )
    response = asyncio.run(policy.act(request))
    assert response.provenance is not None
    return response.provenance


def test_a_run_plays_the_installed_adapter(
    http: httpx.Client, config: ServerConfig, completed: tuple[Path, Path], bandit: OracleHandle
) -> None:
    from kiln_verify.control.resident.serving import resident_for
    from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy

    install_adapter_once(config, completed[1])
    fields = {"max_steps": 1, "max_action_tokens": 4}
    runs = {}
    for adapter in ("base", NAME):
        body = small_request(bandit.base_url, adapter=adapter, **fields)
        created = http.post("/v1/openenv/runs", json=body)
        assert created.status_code == 202, created.text
        runs[adapter] = wait_terminal(http, created.json()["run_id"], timeout=120)
        assert runs[adapter]["state"] == "rollout_ready", runs[adapter].get("failure")
    base_policy = _summary(http, runs["base"])["behavior_policy"]
    tuned_policy = _summary(http, runs[NAME])["behavior_policy"]
    assert base_policy["implementation"] == "kiln-verify/transformers"
    assert base_policy["base_model_sha256"] == tuned_policy["base_model_sha256"]
    assert "adapter" not in base_policy
    revision = install_revision(config)
    assert tuned_policy["adapter"] == {"name": NAME, "content_sha256": "sha256:" + revision}
    answer = listing(http)
    assert answer["loaded_adapters"] == [NAME]
    (entry,) = [e for e in answer["available"] if e["name"] == NAME]
    assert entry["status"] == "loaded"

    # The policies the runs used share one model; each samples from exactly its weights:
    # the adapter's equal a policy built on its own over the installed directory, and
    # differ from the base model's (same seed, same prompt).
    resident = resident_for(config)
    base, tuned = (resident.policy(a, base_name="base") for a in ("base", NAME))
    own = TransformersPolicy(completed[0], adapter_dir=adapters_root(config) / NAME)
    assert own.identity() == tuned.identity()
    plain, adapted, alone = _provenance(base), _provenance(tuned), _provenance(own)
    assert adapted.behavior_logprobs != plain.behavior_logprobs
    assert adapted.completion_token_ids == alone.completion_token_ids
    assert adapted.behavior_logprobs == pytest.approx(alone.behavior_logprobs, abs=1e-5)
    assert _provenance(base) == plain  # the adapter left the base view untouched


def install_revision(config: ServerConfig) -> str:
    from kiln_verify.hf.importer import verify_installed

    return verify_installed(adapters_root(config) / NAME).content_revision


def test_an_unknown_adapter_is_still_refused(http: httpx.Client, bandit: OracleHandle) -> None:
    for adapter, code in (
        ("not-installed", "openenv_adapter_unknown"),
        ("../x", "openenv_invalid_request"),  # refused by the request record itself
    ):
        answer = http.post("/v1/openenv/runs", json=small_request(bandit.base_url, adapter=adapter))
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == code


def test_an_adapter_changed_after_its_import_is_listed_invalid_and_never_served(
    http: httpx.Client, config: ServerConfig, completed: tuple[Path, Path], bandit: OracleHandle
) -> None:
    install_adapter(config, bundle=completed[1], name="changed")
    weights = adapters_root(config) / "changed" / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    (entry,) = [e for e in listing(http)["available"] if e["name"] == "changed"]
    assert entry["status"] == "invalid"
    assert entry["error"].startswith("digest_mismatch")
    assert entry["adapter_model_sha256"] is None
    body = small_request(bandit.base_url, adapter="changed", max_steps=1, max_action_tokens=4)
    created = http.post("/v1/openenv/runs", json=body)
    assert created.status_code == 202, created.text
    run = wait_terminal(http, created.json()["run_id"], timeout=60)
    assert run["state"] == "failed"
    assert run["failure"]["code"] == "persisted_contract_invalid"
    assert "fails verification" in run["failure"]["message"]
    assert "artifacts" not in run or not run["artifacts"]
    (entry,) = [e for e in listing(http)["available"] if e["name"] == "changed"]
    assert entry["last_load_error"].startswith("policy_adapter_invalid")
    assert "changed" not in listing(http)["loaded_adapters"]
