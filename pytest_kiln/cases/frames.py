"""Raw WebSocket frame helpers for the cases that send what the client never would."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pytest_kiln.cases.model import FRAME_TIMEOUT_S, CheckFailed

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection


async def recv_object(ws: ClientConnection, what: str) -> dict[str, Any]:
    """Read one frame within ``FRAME_TIMEOUT_S``; it must be a strict JSON object."""
    from websockets.exceptions import ConnectionClosed

    from kiln_verify.core.jsonio import loads_object
    from kiln_verify.errors import KilnError
    from kiln_verify.limits import MAX_SERVER_FRAME_BYTES

    try:
        message = await asyncio.wait_for(ws.recv(), FRAME_TIMEOUT_S)
    except TimeoutError:
        raise CheckFailed(f"no frame within {FRAME_TIMEOUT_S:g} s for {what}") from None
    except ConnectionClosed as exc:
        raise CheckFailed(
            f"the server closed the connection instead of sending {what}"
            f" (close code {exc.rcvd.code if exc.rcvd else 'none'})"
        ) from None
    if isinstance(message, bytes):
        raise CheckFailed(f"{what} was a binary frame; OpenEnv frames are text")
    try:
        return loads_object(message, max_bytes=MAX_SERVER_FRAME_BYTES)
    except KilnError as exc:
        raise CheckFailed(f"{what} is not a strict JSON object ({exc.code})") from None


async def exchange(ws: ClientConnection, text: str) -> dict[str, Any]:
    """Send one raw text frame and read one reply frame as a JSON object."""
    await ws.send(text)
    return await recv_object(ws, f"the reply to {text[:40]!r}")


def error_code(frame: dict[str, Any]) -> str | None:
    data = frame.get("data")
    if frame.get("type") != "error" or not isinstance(data, dict):
        return None
    code = data.get("code")
    return code if isinstance(code, str) else None


def expect_error(frame: dict[str, Any], code: str) -> None:
    got = error_code(frame)
    if got != code:
        shown = got if got is not None else f"a {str(frame.get('type'))[:20]!r} frame"
        raise CheckFailed(f"expected an error frame with code {code}, got {shown}")


async def expect_closed(ws: ClientConnection, what: str) -> int | None:
    """Wait for the server to close; a text frame first is a failure. Returns the code."""
    from websockets.exceptions import ConnectionClosed

    try:
        message = await asyncio.wait_for(ws.recv(), FRAME_TIMEOUT_S)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd is not None else None
    except TimeoutError:
        raise CheckFailed(f"the server did not close the connection {what}") from None
    raise CheckFailed(f"the server sent a {type(message).__name__} frame {what}")
