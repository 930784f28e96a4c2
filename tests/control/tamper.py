"""A tampering HTTP proxy in front of a real control plane (stubbed *errors only*).

Every request is forwarded to the real server; for artifact downloads the proxy rewrites
the real response according to ``mode`` at the byte level (it writes raw HTTP/1.1 on
the socket, so it can send what no well-behaved server would: a truncated body, bytes
after ``Content-Length``, a weak or wrong ``ETag``, a redirect to another origin). The
real server cannot produce these faults, which is why this stub exists.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import httpx

MODES = (
    "pass",
    "wrong-etag",
    "weak-etag",
    "no-nosniff",
    "no-cache-control",
    "public-cache",
    "no-content-length",
    "length-mismatch",
    "same-length-mutation",
    "truncated",
    "longer",
    "redirect",
    "gzip",
    "status-absolute-url",
    "redirect-everything",
)


class _Handler(socketserver.StreamRequestHandler):
    proxy: ClassVar[TamperProxy]

    def handle(self) -> None:
        request_line = self.rfile.readline(65536).decode("latin-1").strip()
        if not request_line:
            return
        method, path, _ = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            line = self.rfile.readline(65536).decode("latin-1")
            if line in ("\r\n", "\n", ""):
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self.rfile.read(int(headers.get("content-length", "0") or 0))
        self.proxy.seen.append((method, path, headers.get("accept-encoding")))
        upstream = self.proxy.http.request(
            method,
            self.proxy.upstream + path,
            content=body or None,
            headers={"content-type": headers.get("content-type", "application/json")},
        )
        self._answer(path, upstream)

    def _send(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        self.wfile.write(head.encode("latin-1") + b"\r\n" + body)
        self.wfile.flush()

    def _answer(self, path: str, upstream: httpx.Response) -> None:
        mode = self.proxy.mode
        if mode == "redirect-everything":
            self._send(
                "307 Temporary Redirect",
                [
                    ("location", f"http://127.0.0.1:9{path}"),
                    ("content-length", "0"),
                    ("connection", "close"),
                ],
                b"",
            )
            return
        content = upstream.content
        keep = [
            (k, v)
            for k, v in upstream.headers.items()
            if k not in ("content-length", "transfer-encoding", "connection", "date", "server")
        ]
        if "/artifacts/" not in path or upstream.status_code != 200 or mode == "pass":
            if mode == "status-absolute-url" and "/artifacts/" not in path:
                content = content.replace(b'"url":"/v1/', b'"url":"http://127.0.0.1:9/v1/')
            self._send(
                f"{upstream.status_code} X",
                [*keep, ("content-length", str(len(content))), ("connection", "close")],
                content,
            )
            return
        extra: list[tuple[str, str]] = []
        length = len(content)
        if mode == "wrong-etag":
            keep = [(k, '"sha256:' + "0" * 64 + '"') if k == "etag" else (k, v) for k, v in keep]
        elif mode == "weak-etag":
            keep = [(k, "W/" + v) if k == "etag" else (k, v) for k, v in keep]
        elif mode == "no-nosniff":
            keep = [(k, v) for k, v in keep if k != "x-content-type-options"]
        elif mode == "no-cache-control":
            keep = [(k, v) for k, v in keep if k != "cache-control"]
        elif mode == "public-cache":
            keep = [(k, "public, max-age=60") if k == "cache-control" else (k, v) for k, v in keep]
        elif mode == "length-mismatch":
            content = content + b"\n"
            length = len(content)
        elif mode == "same-length-mutation":
            middle = len(content) // 2
            content = content[:middle] + bytes([content[middle] ^ 0x01]) + content[middle + 1 :]
        elif mode == "truncated":
            content = content[: len(content) // 2]
        elif mode == "longer":
            content = content + b"{}\n" * 64
        elif mode == "redirect":
            self._send(
                "302 Found",
                [
                    ("location", f"http://127.0.0.1:9{path}"),
                    ("content-length", "0"),
                    ("connection", "close"),
                ],
                b"",
            )
            return
        elif mode == "gzip":
            extra.append(("content-encoding", "gzip"))
        headers = [*keep, *extra, ("connection", "close")]
        if mode != "no-content-length":
            headers.append(("content-length", str(length)))
        self._send("200 OK", headers, content)
        if mode == "truncated":
            self.connection.shutdown(socket.SHUT_RDWR)


class TamperProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: str) -> None:
        handler = type("Handler", (_Handler,), {})
        super().__init__(("127.0.0.1", 0), handler)
        setattr(handler, "proxy", self)  # noqa: B010 (a class attribute of the new type)
        self.upstream = upstream.rstrip("/")
        self.mode = "pass"
        self.seen: list[tuple[str, str, str | None]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.http = httpx.Client(trust_env=False, timeout=60)


@contextmanager
def tamper_proxy(upstream: str) -> Iterator[TamperProxy]:
    proxy = TamperProxy(upstream)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        proxy.http.close()
