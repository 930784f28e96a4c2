"""A single HTTP/1.1 ``GET`` on its own connection, for artifact bodies only.

Why not ``httpx`` here: an HTTP client library reads exactly ``Content-Length`` bytes and
silently leaves anything the server sent after them in its buffer, so a server that
appends bytes to an artifact body would go unnoticed. This reader asks for
``Connection: close`` and reads the socket to its end: the body is everything after the
header block, so a body longer (or shorter) than announced is visible to the caller,
which counts it against the manifest. It also reads with large buffers straight from the
socket, which keeps a 256 MiB download close to ``curl``'s time (docs/performance.md).

Bounded: the header block is at most ``MAX_RAW_HEADER_BYTES`` and 128 header lines; a
chunked or multi-valued ``Content-Length`` answer is refused; redirects are returned to
the caller as a status (never followed). TLS uses the default context (certificate and
host name verified).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from kiln_verify.errors import ControlTransport, snippet
from kiln_verify.limits import HASH_CHUNK_BYTES, HTTP_CONNECT_TIMEOUT_S, HTTP_REQUEST_TIMEOUT_S

__all__ = ["MAX_RAW_HEADER_BYTES", "RawResponse", "raw_get"]

MAX_RAW_HEADER_BYTES: Final = 64 * 1024
MAX_RAW_HEADER_LINES: Final = 128
TRAILING_WAIT_S: Final = 2.0
"""After the announced body, how long to wait for the server's close before accepting it
(a server that keeps the connection open despite ``Connection: close`` sent nothing more)."""


@dataclass(slots=True)
class RawResponse:
    """Status, lower-cased headers, and the socket positioned after the header block."""

    status: int
    headers: dict[str, str]
    _sock: socket.socket = field(repr=False)
    _pending: bytes = field(default=b"", repr=False)

    def iter_body(self, announced: int) -> Iterator[bytes | memoryview]:
        """Every body byte until the server closes; after ``announced`` bytes the server
        gets ``TRAILING_WAIT_S`` to close, and any further byte is yielded too.

        Chunks are views of one reused buffer (no copy per chunk): consume each before
        asking for the next."""
        received = 0
        if self._pending:
            received += len(self._pending)
            yield self._pending
            self._pending = b""
        buffer = bytearray(HASH_CHUNK_BYTES)
        view = memoryview(buffer)
        while True:
            if received >= announced:
                self._sock.settimeout(TRAILING_WAIT_S)
            try:
                count = self._sock.recv_into(view)
            except TimeoutError:
                if received >= announced:
                    return
                raise ControlTransport("the artifact body stalled") from None
            except OSError as exc:
                raise ControlTransport(f"the artifact body broke off: {exc.strerror}") from None
            if count == 0:
                return
            received += count
            yield view[:count]


def _parse_head(block: bytes) -> tuple[int, dict[str, str]]:
    lines = block.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if (
        len(status_line) < 2
        or not status_line[0].startswith("HTTP/1.")
        or not (status_line[1].isdigit() and len(status_line[1]) == 3)
    ):
        raise ControlTransport(f"not an HTTP/1.x status line: {snippet(lines[0])}")
    if len(lines) > MAX_RAW_HEADER_LINES:
        raise ControlTransport(f"more than {MAX_RAW_HEADER_LINES} header lines")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        if line[0] in " \t" or ":" not in line:
            raise ControlTransport(f"a malformed header line: {snippet(line)}")
        name, _, value = line.partition(":")
        key = name.strip().lower()
        if key in headers:
            if key in ("content-length", "etag", "transfer-encoding", "content-encoding"):
                raise ControlTransport(f"the {key} header appears twice")
            headers[key] += ", " + value.strip()
        else:
            headers[key] = value.strip()
    return int(status_line[1]), headers


def _connect(base_url: str, timeout: float) -> tuple[socket.socket, str]:
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        sock = socket.create_connection((host, port), timeout=HTTP_CONNECT_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if parts.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    except OSError as exc:
        raise ControlTransport(f"cannot connect to {snippet(parts.netloc)}: {exc}") from None
    sock.settimeout(timeout)
    return sock, parts.netloc


@contextmanager
def raw_get(
    base_url: str,
    path: str,
    headers: Mapping[str, str],
    *,
    timeout: float = HTTP_REQUEST_TIMEOUT_S,
) -> Iterator[RawResponse]:
    """``GET base_url + path`` with ``Connection: close``; the response before its body.
    ``timeout`` bounds every wait for the server (its headers, each read of the body)."""
    prefix = urlsplit(base_url).path.rstrip("/")
    sock, netloc = _connect(base_url, timeout)
    try:
        response = _request(sock, netloc, f"{prefix}{path}", headers)
        yield response
    finally:
        sock.close()


def _request(
    sock: socket.socket, netloc: str, target: str, headers: Mapping[str, str]
) -> RawResponse:
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {netloc}",
        "Connection: close",
        "User-Agent: kiln-verify",
    ]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            if len(data) > MAX_RAW_HEADER_BYTES:
                raise ControlTransport(f"the header block exceeds {MAX_RAW_HEADER_BYTES} bytes")
            chunk = sock.recv(65536)
            if not chunk:
                raise ControlTransport("the server closed the connection before its headers")
            data += chunk
    except TimeoutError:
        raise ControlTransport(f"GET {target} timed out") from None
    except OSError as exc:
        raise ControlTransport(f"GET {target} failed: {exc}") from None
    head, _, rest = data.partition(b"\r\n\r\n")
    status, parsed = _parse_head(head)
    return RawResponse(status, parsed, sock, rest)
