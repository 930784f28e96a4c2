"""A proxy in front of a real server that breaks one rule of the HF/TRL routes.

It forwards every request (method, path, body, the headers that matter) to the real
server and answers what it got, less the ``ETag`` header in mode ``drop-etag``: the
real server cannot be made to drop it, which is why this stub exists. It exists to prove
that the conformance suite (pytest_kiln.hf_http) can fail.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

FORWARDED = ("content-type", "content-encoding", "if-match")
DROPPED = ("content-length", "transfer-encoding", "connection", "date", "server")


@dataclass
class Proxy:
    url: str
    mode: str = "pass"


@contextmanager
def hf_proxy(upstream: str, mode: str) -> Iterator[Proxy]:
    proxy = Proxy("", mode)
    client = httpx.Client(base_url=upstream, trust_env=False, timeout=120)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k in FORWARDED if (v := self.headers.get(k)) is not None}
            answer = client.request(self.command, self.path, content=body, headers=headers)
            self.send_response(answer.status_code)
            for key, value in answer.headers.multi_items():
                if key in DROPPED or (key == "etag" and proxy.mode == "drop-etag"):
                    continue
                self.send_header(key, value)
            self.send_header("content-length", str(len(answer.content)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_DELETE = _forward

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        client.close()
        thread.join()
