"""Discovery and identity against live oracle servers; digests recomputed independently."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from kiln_verify.errors import (
    EnvironmentHttpStatus,
    EnvironmentIdentityChanged,
    EnvironmentRedirect,
    EnvironmentTransport,
    LimitExceeded,
)
from kiln_verify.limits import MAX_DISCOVERY_BODY_BYTES
from kiln_verify.openenv.protocol.client import Inspection, OpenEnvClient
from kiln_verify.openenv.protocol.identity import (
    EnvironmentIdentity,
    compare_identities,
    ensure_unchanged,
)
from oracle.runner import ServerHandle
from tests.openenv.protocol.oekit import Start, canonical_sha256, run


async def _inspect(url: str, **kwargs: object) -> Inspection:
    async with OpenEnvClient(url, **kwargs) as client:  # type: ignore[arg-type]
        return await client.inspect()


def test_identity_digests_match_an_independent_computation(
    servers: dict[str, ServerHandle],
) -> None:
    handle = servers["counter"]
    inspection = run(_inspect(handle.base_url + "/"))
    identity = inspection.identity
    raw = {
        path: httpx.get(handle.base_url + path).json()
        for path in ("/metadata", "/schema", "/list_environments", "/openapi.json")
    }
    assert identity.schema_sha256 == canonical_sha256(raw["/schema"])
    assert identity.discovery_sha256 == canonical_sha256(
        {
            "schema": "kiln.openenv-discovery.v1",
            "metadata": raw["/metadata"],
            "environment_schema": raw["/schema"],
            "environments": raw["/list_environments"],
            "openapi": raw["/openapi.json"],
        }
    )
    record = identity.to_json()
    assert record["schema"] == "kiln.openenv-identity.v1"
    assert record["client_profile"] == "openenv-http/1.x"
    assert record["base_url"] == handle.base_url
    assert record["websocket_url"] == handle.ws_url
    assert record["authentication"] == "none"
    assert record["openapi_version"] == raw["/openapi.json"]["info"]["version"]
    assert record["environments"] == ["counter_env"]
    assert record["metadata"]["name"] == "CounterEnvironment"
    assert EnvironmentIdentity.model_validate(json.loads(json.dumps(record))) == identity
    inspection.action_schema.validate({"amount": 2})


def test_identity_record_rejects_unknown_fields(servers: dict[str, ServerHandle]) -> None:
    record = run(_inspect(servers["bandit"].base_url)).identity.to_json()
    record["token"] = "x"
    with pytest.raises(ValueError, match="extra"):
        EnvironmentIdentity.model_validate(record)


def test_same_server_same_identity(servers: dict[str, ServerHandle]) -> None:
    first = run(_inspect(servers["measure"].base_url))
    second = run(_inspect(servers["measure"].base_url))
    assert (
        compare_identities(
            first.identity,
            second.identity,
            expected_schema=first.environment_schema,
            actual_schema=second.environment_schema,
        )
        == []
    )


def test_different_servers_name_the_changed_fields(servers: dict[str, ServerHandle]) -> None:
    counter = run(_inspect(servers["counter"].base_url))
    bandit = run(_inspect(servers["bandit"].base_url))
    changed = compare_identities(
        counter.identity,
        bandit.identity,
        expected_schema=counter.environment_schema,
        actual_schema=bandit.environment_schema,
    )
    assert changed == [
        "base_url",
        "websocket_url",
        "environments",
        "metadata",
        "schema_sha256",
        "discovery_sha256",
        "schema.action",
        "schema.observation",
    ]
    with pytest.raises(EnvironmentIdentityChanged, match="base_url"):
        ensure_unchanged(counter.identity, bandit.identity)


def test_identity_drift_is_detected(start: Start) -> None:
    handle = start("counter", faults=["identity-drift=1"])

    async def scenario() -> list[str]:
        async with OpenEnvClient(handle.base_url) as client:
            before = await client.inspect()
            session = await client.open_session()
            await session.reset({"seed": 1})
            await session.reset({"seed": 2})
            await session.close()
            after = await client.inspect()
        return compare_identities(
            before.identity,
            after.identity,
            expected_schema=before.environment_schema,
            actual_schema=after.environment_schema,
        )

    changed = run(scenario())
    assert "schema_sha256" in changed
    assert "discovery_sha256" in changed
    assert "base_url" not in changed
    assert "authentication" not in changed


async def _fake_server(status_line: str, headers: str, body: bytes) -> tuple[asyncio.Server, str]:
    """A raw HTTP server answering every request the same way (redirects, huge bodies)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = f"HTTP/1.1 {status_line}\r\n{headers}Content-Length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def test_redirects_are_never_followed() -> None:
    async def scenario() -> None:
        server, url = await _fake_server("302 Found", "Location: http://elsewhere/\r\n", b"")
        async with server, OpenEnvClient(url) as client:
            with pytest.raises(EnvironmentRedirect, match=r"302.*elsewhere"):
                await client.health()

    run(scenario())


@pytest.mark.parametrize(
    ("size", "ok"), [(MAX_DISCOVERY_BODY_BYTES, True), (MAX_DISCOVERY_BODY_BYTES + 1, False)]
)
def test_body_cap_boundary(size: int, ok: bool) -> None:
    async def scenario() -> None:
        server, url = await _fake_server("200 OK", "", b" " * size)
        async with server, OpenEnvClient(url) as client:
            if ok:
                await client.health()
            else:
                with pytest.raises(LimitExceeded, match="MAX_DISCOVERY_BODY_BYTES"):
                    await client.health()

    run(scenario())


def test_stopped_server_is_a_transport_error(start: Start) -> None:
    handle = start("counter")
    handle.stop()
    with pytest.raises(EnvironmentTransport):
        run(_inspect(handle.base_url))


def test_unknown_path_prefix_is_http_status(servers: dict[str, ServerHandle]) -> None:
    with pytest.raises(EnvironmentHttpStatus, match="404"):
        run(_inspect(servers["counter"].base_url + "/nothing-here"))
