"""A raw WebSocket probe: send byte-exact frames, record every reply frame and the close.

The differential tests drive our oracle and an openenv 0.10.0 peer with the same script of
frames and compare the transcripts. No client library logic sits in between: text frames
are sent exactly as written (a `bytes` item goes out as a binary frame), replies are kept
verbatim, and a close is recorded with the code the server sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Literal

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

#: A frame to send: `str` as a text frame, `bytes` as a binary frame.
Frame = str | bytes
REPLY_TIMEOUT_S = 10.0


@dataclasses.dataclass(frozen=True)
class Event:
    """One thing the server did: sent a text frame, closed the socket (with its code), or
    stayed silent for `REPLY_TIMEOUT_S` where a reply was due."""

    kind: Literal["frame", "closed", "silent"]
    text: str = ""
    code: int | None = None

    def json(self) -> Any:
        return json.loads(self.text)


@dataclasses.dataclass(frozen=True)
class Transcript:
    """Per frame sent, the events it produced; `unsent` counts frames never sent (closed)."""

    replies: tuple[tuple[Event, ...], ...]
    unsent: int

    def events(self) -> list[Event]:
        return [event for reply in self.replies for event in reply]

    def frames(self) -> list[Any]:
        return [event.json() for event in self.events() if event.kind == "frame"]


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://", 1).rstrip("/") + "/ws"


async def open_session(base_url: str) -> ClientConnection:
    return await connect(
        ws_url(base_url),
        proxy=None,
        ping_interval=None,
        open_timeout=REPLY_TIMEOUT_S,
        close_timeout=2,
        max_size=None,
    )


def _close_event(exc: ConnectionClosed) -> Event:
    code = exc.rcvd.code if exc.rcvd is not None else None
    return Event("closed", code=code)


async def _drain(ws: ClientConnection) -> list[Event]:
    """Frames still buffered after the peer closed, then the close itself."""
    events: list[Event] = []
    while True:
        try:
            message = await asyncio.wait_for(ws.recv(), REPLY_TIMEOUT_S)
        except ConnectionClosed as exc:
            events.append(_close_event(exc))
            return events
        except TimeoutError:
            events.append(Event("silent"))
            return events
        events.append(Event("frame", text=_text(message)))


def _text(message: str | bytes) -> str:
    return message if isinstance(message, str) else message.decode("utf-8", "replace")


async def exchange(ws: ClientConnection, frames: Sequence[Frame]) -> Transcript:
    """Send each frame and read exactly one reply, stopping at the first close.

    A frame that gets no reply (`close`) is followed by waiting for the server's close.
    Callers end a script with `{"type":"close"}` so a still-open socket is proven open
    (every earlier frame was answered) and then closed deliberately.
    """
    replies: list[tuple[Event, ...]] = []
    for position, frame in enumerate(frames):
        try:
            await ws.send(frame)
        except ConnectionClosed:
            replies.append(tuple(await _drain(ws)))
            return Transcript(tuple(replies), len(frames) - position)
        try:
            message = await asyncio.wait_for(ws.recv(), REPLY_TIMEOUT_S)
        except ConnectionClosed as exc:
            replies.append((_close_event(exc),))
            return Transcript(tuple(replies), len(frames) - position - 1)
        except TimeoutError:
            replies.append((Event("silent"),))
            return Transcript(tuple(replies), len(frames) - position - 1)
        replies.append((Event("frame", text=_text(message)),))
    return Transcript(tuple(replies), 0)


async def run_script(base_url: str, frames: Sequence[Frame]) -> Transcript:
    """Open a session, exchange `frames`, and always release the socket."""
    ws = await open_session(base_url)
    try:
        return await exchange(ws, frames)
    finally:
        await ws.close()


async def unsolicited(ws: ClientConnection, timeout_s: float = REPLY_TIMEOUT_S) -> list[Event]:
    """Everything the server sends without being asked, up to and including its close."""
    events: list[Event] = []
    while True:
        try:
            message = await asyncio.wait_for(ws.recv(), timeout_s)
        except ConnectionClosed as exc:
            events.append(_close_event(exc))
            return events
        except TimeoutError:
            events.append(Event("silent"))
            return events
        events.append(Event("frame", text=_text(message)))
