"""Our OpenEnv client (`kiln_verify.openenv`) against the openenv 0.10.0 peers.

The peers (`openenv_peers.py`) are served by openenv's own `create_app`, so their wire
layer -- discovery routes, WebSocket framing, error codes, the Task API -- is code written
by others. An episode our client completes against them, and every error it classifies
correctly, is evidence that the client reads OpenEnv as OpenEnv itself speaks it, not only
as our oracle does. Expected values are computed independently here (the schema digest
with `hashlib`, the discovery documents fetched with plain `httpx`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv")

from kiln_verify.errors import RecoverableProtocolError, TerminalProtocolError
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.protocol.tasks import task_catalog
from kiln_verify.openenv.protocol.wire import ErrorCode, Observation, ProtocolError, Reward

pytestmark = pytest.mark.interop

PEERS = ("counter", "bandit", "algebra")


def _get_json(url: str) -> Any:
    with httpx.Client(timeout=10.0, trust_env=False, follow_redirects=False) as http:
        response = http.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.json()


def _sha256_of_canonical(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _error_of(exc: RecoverableProtocolError | TerminalProtocolError) -> ProtocolError:
    error = exc.error
    assert isinstance(error, ProtocolError), error
    return error


# -- discovery ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", PEERS)
def test_inspect_each_peer(openenv_urls: dict[str, str], key: str) -> None:
    base = openenv_urls[key]
    raw_schema = _get_json(base + "/schema")
    raw_environments = _get_json(base + "/list_environments")
    raw_metadata = _get_json(base + "/metadata")

    async def run() -> Any:
        async with OpenEnvClient(base) as client:
            return await client.inspect()

    inspection = asyncio.run(run())
    identity = inspection.identity
    assert identity.client_profile == "openenv-http/1.x"
    assert identity.authentication == "none"
    assert identity.base_url == base
    assert identity.websocket_url == base.replace("http://", "ws://", 1) + "/ws"
    assert identity.environments == raw_environments
    assert len(identity.environments) >= 1
    assert identity.metadata.name == raw_metadata["name"]
    assert identity.schema_sha256 == _sha256_of_canonical(raw_schema)
    assert inspection.environment_schema == raw_schema
    assert identity.to_json()["schema"] == "kiln.openenv-identity.v1"


# -- episodes -------------------------------------------------------------------------------


def test_counter_episode(openenv_urls: dict[str, str]) -> None:
    async def run() -> tuple[list[Observation], Any]:
        async with OpenEnvClient(openenv_urls["counter"]) as client:
            session = await client.open_session()
            try:
                first = await session.reset({"seed": 17, "episode_id": "kiln-interop"})
                second = await session.step({"amount": 2, "note": "first"})
                third = await session.step({"amount": 2, "note": "second"})
                state = await session.state()
            finally:
                await session.close()
            return [first, second, third], state

    (first, second, third), state = asyncio.run(run())
    assert first.observation["total"] == 0
    assert first.observation["target"] == 4
    assert first.reward == Reward("null", None)
    assert first.done is False

    assert second.observation["total"] == 2
    assert second.observation["last_note"] == "first"
    assert second.reward == Reward("float", 2.0)
    assert second.done is False

    assert third.observation["total"] == 4
    assert third.observation["last_note"] == "second"
    assert third.reward == Reward("float", 4.0)
    assert third.reward != Reward("integer", 4)
    assert third.done is True

    assert state == {"episode_id": "kiln-interop", "step_count": 2, "total": 4}


def test_bandit_execution_error_is_recoverable(openenv_urls: dict[str, str]) -> None:
    async def run() -> tuple[RecoverableProtocolError, Observation, bool]:
        async with OpenEnvClient(openenv_urls["bandit"]) as client:
            session = await client.open_session()
            try:
                await session.reset({"seed": 41})
                with pytest.raises(RecoverableProtocolError) as caught:
                    await session.step({"arm": 99})
                usable = session.usable
                good = await session.step({"arm": 0})
            finally:
                await session.close()
            return caught.value, good, usable

    exc, good, usable = asyncio.run(run())
    error = _error_of(exc)
    assert error.code is ErrorCode.EXECUTION_ERROR
    assert error.recoverable
    assert usable
    assert good.reward.kind == "integer"
    assert good.reward.value in (0, 1)
    assert good.observation["pulls"] == 1
    assert good.observation["last_arm"] == 0


def test_algebra_validation_error_is_recoverable(openenv_urls: dict[str, str]) -> None:
    async def run() -> tuple[RecoverableProtocolError, Any]:
        async with OpenEnvClient(openenv_urls["algebra"]) as client:
            session = await client.open_session()
            try:
                await session.reset({"seed": 3})
                with pytest.raises(RecoverableProtocolError) as caught:
                    await session.step({"answer": 7})
                assert session.usable
                state = await session.state()  # the session still answers
            finally:
                await session.close()
            return caught.value, state

    exc, state = asyncio.run(run())
    error = _error_of(exc)
    assert error.code is ErrorCode.VALIDATION_ERROR
    assert error.recoverable
    assert isinstance(error.errors, list)
    assert error.errors
    assert isinstance(state, dict)


# -- the Task API ---------------------------------------------------------------------------


def test_task_catalog_on_algebra(openenv_urls: dict[str, str]) -> None:
    base = openenv_urls["algebra"]
    name = _get_json(base + "/list_environments")[0]
    raw_splits = _get_json(f"{base}/{name}/splits")

    async def run() -> tuple[Any, Any]:
        async with OpenEnvClient(base) as client:
            listing = await task_catalog(client)
            split = listing.splits[0].name
            page = await task_catalog(client, name, split, start=1, limit=2)
            return listing, page

    listing, page = asyncio.run(run())
    assert listing.environment_name == name
    assert listing.task_api == "available"
    assert [split.name for split in listing.splits] == [split["name"] for split in raw_splits]
    assert listing.tasks is None
    assert page.task_api == "available"
    assert page.selected_split == listing.splits[0].name
    assert isinstance(page.num_tasks, int)
    assert page.num_tasks >= 3
    assert (page.start, page.stop) == (1, 3)
    assert page.tasks is not None
    assert len(page.tasks) == 2
    json_form = page.to_json()
    assert json_form["environment_name"] == name
    assert len(json_form["tasks"]) == 2


def test_task_catalog_unsupported_on_counter(openenv_urls: dict[str, str]) -> None:
    base = openenv_urls["counter"]
    name = _get_json(base + "/list_environments")[0]
    with httpx.Client(timeout=10.0, trust_env=False) as http:
        assert http.get(f"{base}/{name}/splits").status_code == 501

    async def run() -> Any:
        async with OpenEnvClient(base) as client:
            return await task_catalog(client)

    catalog = asyncio.run(run())
    assert catalog.environment_name == name
    assert catalog.task_api == "unsupported"
    assert catalog.splits == []
    assert catalog.to_json() == {
        "environment_name": name,
        "task_api": "unsupported",
        "splits": [],
    }


# -- a failing factory ----------------------------------------------------------------------


def test_factory_error_is_terminal(openenv_urls: dict[str, str]) -> None:
    async def run() -> tuple[TerminalProtocolError, bool]:
        async with OpenEnvClient(openenv_urls["factory-error"]) as client:
            # openenv accepts the upgrade, then sends FACTORY_ERROR unsolicited and closes:
            # the upgrade succeeds and the first exchange surfaces the terminal error.
            session = await client.open_session()
            try:
                with pytest.raises(TerminalProtocolError) as caught:
                    await session.reset({"seed": 1})
                usable = session.usable
            finally:
                await session.close()
            return caught.value, usable

    exc, usable = asyncio.run(run())
    error = _error_of(exc)
    assert error.code is ErrorCode.FACTORY_ERROR
    assert error.is_terminal
    assert error.factory_name == "CounterEnvironment"
    assert not usable


def test_factory_error_through_capacity_acquisition(openenv_urls: dict[str, str]) -> None:
    async def run() -> TerminalProtocolError:
        async with OpenEnvClient(openenv_urls["factory-error"]) as client:
            with pytest.raises(TerminalProtocolError) as caught:
                await client.open_session_with_capacity(1.0, reset_data={"seed": 1})
            return caught.value

    error = _error_of(asyncio.run(run()))
    assert error.code is ErrorCode.FACTORY_ERROR
