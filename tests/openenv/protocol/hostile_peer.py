"""A hostile OpenEnv peer: a real oracle whose answers carry a JSON-escaped bearer token.

A real server never echoes credentials on demand, so this wraps the oracle's own ASGI
application (served by uvicorn on loopback, exactly as ``oracle.runner`` serves it) in a
middleware that rewrites one kind of answer: an HTTP document (``/health``, the discovery
documents, a Task API route) or the WebSocket reply to one kind of request (``reset``,
``step``, ``state``; ``error`` replaces the reset reply with an error frame). The token is
put in by :func:`inject` at a position hypothesis chooses (any container at any depth, as
a new value, a new key, or in place of an existing string), in a spelling hypothesis
chooses (:func:`escaped_spellings`), so the raw bytes never hold it.

:func:`decodes_to_token` is the other half of every test: whether a text holds the token
in any spelling that decodes to it (raw, JSON or Python escapes, percent-encoding).
"""

from __future__ import annotations

import dataclasses
import functools
import http.client
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import uvicorn
from hypothesis import strategies as st

from oracle.app import OracleApp
from oracle.inventory import environment_class
from oracle.runner import WS_IMPLEMENTATION

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PLACEHOLDER = "kiln-hostile-placeholder-5c1e"
TOKEN_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="
"""Characters of the tokens sent over the wire (RFC 6750 b64token, so ``/`` is in it)."""
_PROJECT = Path(__file__).resolve().parents[3]


@functools.cache
def _product_source() -> str:
    """The source text of ``kiln_verify`` and ``oracle``: every word either can print."""
    files = sorted((_PROJECT / "kiln_verify").rglob("*.py")) + sorted(
        (_PROJECT / "oracle").rglob("*.py")
    )
    return "\n".join(path.read_text(encoding="utf-8") for path in files)


def keepable(token: str, *public: str) -> bool:
    """Whether ``token`` is no piece of the product's own wording nor of ``public``.
    Hypothesis also draws the project's string literals, and a key that is a piece of an
    error code (``credential_r`` of ``credential_reflected``) is in every refusal without
    ever having been echoed: no tool can keep such a key out of its output, so it is no
    test of reflection."""
    return all(token not in words for words in (_product_source(), *public))


def secret_tokens(*public: str) -> st.SearchStrategy[str]:
    """Tokens of 12-48 characters of :data:`TOKEN_ALPHABET` that are :func:`keepable`
    (``public``: the calling module's source, with its variable names and fixed replies)."""
    return st.text(TOKEN_ALPHABET, min_size=12, max_size=48).filter(
        lambda token: keepable(token, *public)
    )


# --- spellings ------------------------------------------------------------------------------


def _u_escape(char: str, upper: bool) -> str:
    code = ord(char)
    units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10),
                                           0xDC00 + ((code - 0x10000) & 0x3FF)]  # fmt: skip
    text = "".join(f"\\u{unit:04x}" for unit in units)
    return text.upper().replace("\\U", "\\u") if upper else text


def _char_spellings(char: str) -> list[str]:
    """Every JSON spelling of one character: escapes first, the raw character last."""
    spellings = [_u_escape(char, False), _u_escape(char, True)]
    short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
             "\r": "\\r", "\t": "\\t"}.get(char)  # fmt: skip
    if short is not None:
        spellings.append(short)
    if char not in '"\\' and ord(char) >= 0x20:
        spellings.append(char)
    return spellings


@st.composite
def escaped_spellings(draw: st.DrawFn, token: str) -> str:
    """A JSON string body that decodes to ``token`` and escapes at least one character."""
    forced = draw(st.integers(0, len(token) - 1))
    parts = []
    for index, char in enumerate(token):
        options = _char_spellings(char)
        if index == forced and len(options) > 1 and options[-1] == char:
            options = options[:-1]
        parts.append(options[draw(st.integers(0, len(options) - 1))])
    return "".join(parts)


def json_body(text: str) -> str:
    """``text`` as the body of a JSON string literal (the standard spelling)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


# --- injection ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Injection:
    """Where and how the spelled token goes into one document.

    ``steps`` choose the container (0 stops, k descends into the k-th child container,
    cyclically), ``mode`` 0 adds a value, 1 adds a key, 2 replaces an existing string (or
    adds a value when the container has none), ``wrap`` nests the new value in that many
    alternating arrays and objects. ``literal`` is the JSON string body put in.
    """

    literal: str
    steps: tuple[int, ...] = ()
    mode: int = 0
    wrap: int = 0


def injections(token: str) -> st.SearchStrategy[Injection]:
    prefix = st.text(st.characters(codec="utf-8"), max_size=4)
    literal = st.builds(
        lambda before, spelled, after: json_body(before) + spelled + json_body(after),
        prefix, escaped_spellings(token), prefix,
    )  # fmt: skip
    return st.builds(
        Injection,
        literal=literal,
        steps=st.lists(st.integers(0, 4), max_size=6).map(tuple),
        mode=st.integers(0, 2),
        wrap=st.integers(0, 3),
    )


def _place(container: Any, injection: Injection) -> None:
    value: Any = PLACEHOLDER
    if injection.mode == 1:
        value = {PLACEHOLDER: 0}
    for level in range(injection.wrap):
        value = [value] if level % 2 == 0 else {"deeper": value}
    if isinstance(container, dict):
        strings = [key for key, member in container.items() if isinstance(member, str)]
        if injection.mode == 2 and strings:
            container[strings[len(container) % len(strings)]] = PLACEHOLDER
        elif injection.mode == 1 and injection.wrap == 0:
            container[PLACEHOLDER] = 0
        else:
            container["kiln_hostile"] = value
    else:
        container.insert(len(container) // 2, value)


def inject(document: Any, injection: Injection) -> str:
    """``document`` as compact JSON with the token's spelling at the chosen position."""
    root: Any = [document] if not isinstance(document, dict | list) else document
    container = root
    for step in injection.steps:
        children = container.values() if isinstance(container, dict) else container
        nested = [child for child in children if isinstance(child, dict | list)]
        if step == 0 or not nested:
            break
        container = nested[(step - 1) % len(nested)]
    _place(container, injection)
    text = json.dumps(root, ensure_ascii=False, separators=(",", ":"))
    return text.replace(json.dumps(PLACEHOLDER), '"' + injection.literal + '"')


# --- the server -----------------------------------------------------------------------------

HTTP_TARGETS = {
    "/health": "health", "/metadata": "metadata", "/schema": "schema",
    "/list_environments": "list_environments", "/openapi.json": "openapi",
}  # fmt: skip
WS_TARGETS = ("reset", "step", "state", "error")


def _http_target(path: str) -> str:
    if path in HTTP_TARGETS:
        return HTTP_TARGETS[path]
    return path.rsplit("/", 1)[-1]  # /{env}/splits, /{env}/task_range, ...


class HostileApp:
    """The oracle, with :attr:`target`'s answers rewritten by :attr:`injection`."""

    def __init__(self, inner: OracleApp) -> None:
        self.inner = inner
        self.target: str | None = None
        self.injection: Injection | None = None
        self.rewritten = 0

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if self.target is None or scope["type"] == "lifespan":
            await self.inner(scope, receive, send)  # type: ignore[arg-type]
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        else:
            await self._websocket(scope, receive, send)

    def _rewrite(self, text: str | bytes) -> str:
        assert self.injection is not None
        self.rewritten += 1
        return inject(json.loads(text), self.injection)

    async def _http(self, scope: Message, receive: Receive, send: Send) -> None:
        if _http_target(scope["path"]) != self.target:
            await self.inner(scope, receive, send)  # type: ignore[arg-type]
            return
        start: Message = {}
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = self._rewrite(b"".join(chunks)).encode("utf-8")
            headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.inner(scope, receive, capture)  # type: ignore[arg-type]

    async def _websocket(self, scope: Message, receive: Receive, send: Send) -> None:
        asked: list[str | None] = [None]

        async def watch(message_source: Receive = receive) -> Message:
            message = await message_source()
            text = message.get("text")
            if message["type"] == "websocket.receive" and isinstance(text, str):
                kind = json.loads(text).get("type")
                asked[0] = kind if isinstance(kind, str) else None
            return message

        async def rewrite(message: Message) -> None:
            text = message.get("text")
            if message["type"] == "websocket.send" and isinstance(text, str):
                if self.target == "error" and asked[0] == "reset":
                    error = {"type": "error", "data": {"code": "EXECUTION_ERROR",
                             "message": "the environment failed", "errors": ["x"]}}  # fmt: skip
                    message = {**message, "text": self._rewrite(json.dumps(error))}
                elif asked[0] == self.target:
                    message = {**message, "text": self._rewrite(text)}
            await send(message)

        await self.inner(scope, watch, rewrite)  # type: ignore[arg-type]


@dataclasses.dataclass
class HostileServer:
    app: HostileApp
    base_url: str

    @contextmanager
    def serving(self, target: str, injection: Injection) -> Iterator[HostileApp]:
        self.app.target, self.app.injection, self.app.rewritten = target, injection, 0
        try:
            yield self.app
        finally:
            self.app.target = self.app.injection = None


@contextmanager
def hostile_server(name: str) -> Iterator[HostileServer]:
    """The oracle environment ``name`` behind a :class:`HostileApp`, on 127.0.0.1."""
    app = HostileApp(OracleApp(environment_class(name)))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_config=None, log_level="warning",
                            access_log=False, ws=WS_IMPLEMENTATION)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the hostile server did not start")
            time.sleep(0.01)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/health")
        assert connection.getresponse().status == 200
        connection.close()
        yield HostileServer(app, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


# --- the other half: is the token anywhere? -------------------------------------------------

_PYTHON_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")
_JSON_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
_SHORT = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _json_unescape(text: str) -> str:
    decoded = _JSON_ESCAPE.sub(
        lambda m: _SHORT[m.group()[1]] if len(m.group()) == 2 else chr(int(m.group()[2:], 16)),
        text,
    )
    return decoded.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _python_unescape(text: str) -> str:
    return _PYTHON_ESCAPE.sub(lambda m: chr(int(m.group()[2:], 16)), text)


def decodes_to_token(token: str, text: str | bytes) -> bool:
    """Whether ``text`` holds ``token`` raw or behind JSON escapes, Python escapes or
    percent-encoding (in any order, up to two layers deep)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    layers = (_json_unescape, _python_unescape, unquote)
    seen = {text}
    frontier = [text]
    for _ in range(2):
        frontier = [layer(item) for item in frontier for layer in layers]
        seen.update(frontier)
    return any(token in item for item in seen)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


@contextmanager
def every_log_record() -> Iterator[list[str]]:
    """Every record emitted meanwhile, formatted with any traceback: kiln-verify's own
    loggers at every level, the libraries' at the levels a run leaves them (their DEBUG
    output, which traces raw frames, is opt-in and outside kiln-verify's control)."""
    handler = _Records()
    root, ours = logging.getLogger(), logging.getLogger("kiln_verify")
    level = ours.level
    root.addHandler(handler)
    ours.setLevel(logging.DEBUG)
    try:
        yield handler.texts
    finally:
        root.removeHandler(handler)
        ours.setLevel(level)
