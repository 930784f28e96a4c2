"""The HTTP client verifies TLS for https, and builds no TLS context for plain http."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from kiln_verify.openenv.protocol.client import OpenEnvClient


@pytest.mark.parametrize(
    ("url", "verify"),
    [("http://127.0.0.1:8000", False), ("https://env.example.com", True),
     ("https://env.example.com/prefix/", True)],
)
def test_verification_follows_the_scheme(monkeypatch: pytest.MonkeyPatch, url: str,
                                         verify: bool) -> None:
    seen: list[dict[str, Any]] = []
    real = httpx.AsyncClient

    def capture(**kwargs: Any) -> httpx.AsyncClient:
        seen.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(httpx, "AsyncClient", capture)
    client = OpenEnvClient(url)
    asyncio.run(client.aclose())
    assert [kwargs["verify"] for kwargs in seen] == [verify]
    assert seen[0]["follow_redirects"] is False  # what makes an http client TLS-free
