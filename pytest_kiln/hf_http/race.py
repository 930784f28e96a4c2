"""A delete racing a download: the download that started first must arrive whole.

The archive is made large (a random ``split_manifest`` of about 4 MB, stored in the
export; gzip cannot shrink random bytes) and read through a socket with a small receive
buffer, so the server is still sending when the ``DELETE`` arrives. A server that keeps the registry
entry until the stream ends (Kiln's rule) answers the ``DELETE`` after the last byte; one
that removes the files mid-stream sends a short or different archive, which fails here.
"""

from __future__ import annotations

import base64
import random
import socket
import threading
from typing import Final
from urllib.parse import urlsplit

import httpx

from kiln_verify.openenv.protocol.urls import verifies_tls
from pytest_kiln.cases.model import CheckFailed, NotApplicable
from pytest_kiln.hf_http.context import HfContext, strong_etag
from pytest_kiln.hf_http.export_checks import MAX_DOWNLOAD_BYTES, archive_identity

#: Random bytes in the split manifest: base64 keeps them under Kiln's 4 MiB split limit.
PAD_BYTES: Final = 2_900_000
#: The client's receive buffer: the server cannot hand the archive to the kernel at once.
RECEIVE_BUFFER: Final = 4096
#: How long the DELETE is given to answer while the download is held unread.
HOLD_S: Final = 0.5
SOCKET_TIMEOUT_S: Final = 60.0


def _read_head(sock: socket.socket) -> tuple[int, dict[str, list[str]], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise CheckFailed("the server closed the download before its headers ended")
        data += chunk
        if len(data) > 65536:
            raise CheckFailed("the download's headers exceed 64 KiB")
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), []).append(value.strip())
    return status, headers, rest


def _dechunk(raw: bytes) -> bytes:
    body, at = bytearray(), 0
    while True:
        end = raw.find(b"\r\n", at)
        if end < 0:
            raise CheckFailed("the chunked download ended inside a chunk header")
        size = int(raw[at:end].split(b";")[0], 16)
        at = end + 2
        if size == 0:
            if raw[at:] not in (b"\r\n", b""):
                raise CheckFailed("bytes follow the chunked download's last chunk")
            return bytes(body)
        if len(raw) < at + size + 2:
            raise CheckFailed("the chunked download is short")
        body += raw[at : at + size]
        at += size + 2


def check_delete_racing_download(ctx: HfContext) -> str:
    url = urlsplit(ctx.url)
    if url.scheme != "http" or url.hostname is None:
        raise NotApplicable("the race case drives a raw socket and speaks plain http only")
    pad = base64.b64encode(random.Random(28).randbytes(PAD_BYTES)).decode("ascii")
    name, digest = ctx.create("race", split_manifest={"kiln_conformance_pad": pad})
    path = ctx.export_path(name, "/download")
    answers: list[httpx.Response | BaseException] = []

    def delete() -> None:
        try:
            with httpx.Client(
                base_url=ctx.url, trust_env=False, timeout=120, verify=verifies_tls(ctx.url)
            ) as other:
                answers.append(
                    other.delete(ctx.export_path(name), headers={"if-match": f'"{digest}"'})
                )
        except BaseException as exc:  # reported below
            answers.append(exc)

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.connect((url.hostname, url.port or 80))
        host = url.netloc.encode("ascii")
        sock.sendall(b"GET " + path.encode("ascii") + b" HTTP/1.1\r\nHost: " + host
                     + b"\r\nConnection: close\r\n\r\n")  # fmt: skip
        status, headers, raw = _read_head(sock)
        if status != 200:
            raise CheckFailed(f"GET download answered {status}")
        response = httpx.Response(200, headers=[(k, v) for k, vs in headers.items() for v in vs])
        strong_etag(response, digest, "GET download")
        racer = threading.Thread(target=delete, daemon=True)
        racer.start()
        racer.join(HOLD_S)
        answered_early = not racer.is_alive()
        while chunk := sock.recv(1 << 16):
            raw += chunk
            if len(raw) > MAX_DOWNLOAD_BYTES:
                raise CheckFailed(f"the download exceeds {MAX_DOWNLOAD_BYTES} bytes")
    racer.join(SOCKET_TIMEOUT_S)
    if "chunked" in ",".join(headers.get("transfer-encoding", [])).lower():
        body = _dechunk(raw)
    elif (length := headers.get("content-length")) is not None:
        if len(raw) != int(length[0]):
            raise CheckFailed(f"the download has {len(raw)} bytes, Content-Length {length[0]}")
        body = raw
    else:
        body = raw
    found = archive_identity(body, name)
    if found != digest:
        raise CheckFailed(f"the raced download verifies as {found}, not {digest}")
    if not answers or not isinstance(answers[0], httpx.Response):
        raise CheckFailed(f"the racing DELETE did not answer: {answers[:1]}")
    if answers[0].status_code != 200:
        raise CheckFailed(f"the racing DELETE answered {answers[0].status_code}")
    ctx.deleted(name)
    ctx.absent(name)
    when = "before" if answered_early else "only after"
    return (
        f"the download ({len(body)} bytes) arrived whole and verified; the racing DELETE "
        f"answered 200 {when} the held stream was read"
    )
