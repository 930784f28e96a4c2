"""A tampering export server: what a real one cannot be made to send.

It answers the three calls of ``hf export-* --url`` from a real export (a local export's
archive is the bytes a real server serves): ``POST`` a summary, ``GET .../download`` the
archive, ``DELETE`` a confirmation, with one part of one answer spoiled per test (a weak
or missing ETag, a redirect, a short or long body, changed bytes, a failing delete).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    """What the stub answers; every field starts honest."""

    summary: dict[str, Any]
    archive: bytes
    create_etag: str | None = None
    """``None``: the honest quoted digest; ``""``: no header."""
    download_etag: str | None = None
    download_status: int = 200
    location: str | None = None
    chunked: bool = False
    length: int | None = None
    """The announced Content-Length (default: the body's)."""
    tail: bytes = b""
    """Bytes sent after the body (beyond the announced length or the last chunk)."""
    delete_status: int = 200
    seen: list[str] = field(default_factory=list)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    digest = script.summary.get("export_sha256", "")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _json(self, status: int, body: object, etag: str | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if etag:
                self.send_header("ETag", etag)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            script.seen.append(f"POST {self.path}")
            etag = f'"{digest}"' if script.create_etag is None else script.create_etag
            self._json(201, script.summary, etag)

        def do_DELETE(self) -> None:
            script.seen.append(f"DELETE {self.path} {self.headers.get('If-Match')}")
            if script.delete_status != 200:
                error = {"error": {"code": "hf_trl_export_failed", "message": "disk", "hint": ""}}
                self._json(script.delete_status, error)
                return
            self._json(200, {"status": "deleted", "name": script.summary["name"]})

        def do_GET(self) -> None:
            script.seen.append(f"GET {self.path}")
            self.send_response(script.download_status)
            if script.location is not None:
                self.send_header("Location", script.location)
            self.send_header("Content-Type", "application/gzip")
            etag = f'"{digest}"' if script.download_etag is None else script.download_etag
            if etag:
                self.send_header("ETag", etag)
            body = script.archive
            if script.chunked:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for start in range(0, len(body), 65536):
                    piece = body[start : start + 65536]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n" + script.tail)
                return
            length = len(body) if script.length is None else script.length
            self.send_header("Content-Length", str(length))
            self.end_headers()
            self.wfile.write(body + script.tail)

    return Handler


@contextmanager
def tampering_server(script: Script) -> Iterator[str]:
    """The stub on an ephemeral loopback port (HTTP/1.0: one answer per connection)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
