"""What the import route admits before it installs: the name, the headers, the body.

Everything here runs on the event loop and is cheap, so a request that cannot succeed is
refused before the server spends a byte of disk on it (kiln-hf-trl-contract §5.8):

- the adapter name (Kiln's ``ImportAdapterName``) and its target: an existing name is
  ``adapter_already_exists`` before the body is read, and never replaced later either;
- the headers: exactly one ``Content-Type: application/gzip`` (parameters allowed), at most
  one ``Content-Encoding`` and only ``identity``, at most one decimal ``Content-Length`` of
  at most ``MAX_IMPORT_COMPRESSED_BYTES``;
- the body, streamed into a new private file inside the staging directory: at most
  ``MAX_IMPORT_COMPRESSED_BYTES`` bytes whatever the headers said, never empty, and no pause
  longer than ``HTTP_IMPORT_BODY_IDLE_TIMEOUT_S`` between two chunks (``hf_trl_import_timeout``,
  408). Disk writes and the final ``fsync`` run in worker threads.

The caps are read from this module's globals at call time (tests lower them).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Final

from kiln_verify.errors import (
    ApiHfImportInvalid,
    ApiHfImportTimeout,
    KilnError,
    snippet,
)
from kiln_verify.hf.envelope import check_import_name
from kiln_verify.limits import (
    HASH_CHUNK_BYTES,
    HTTP_IMPORT_BODY_IDLE_TIMEOUT_S,
    MAX_IMPORT_COMPRESSED_BYTES,
)

__all__ = ["ARCHIVE_NAME", "admit_name", "check_headers", "receive_body"]

ARCHIVE_NAME: Final = "envelope.tar.gz"
"""The body's file inside the private staging directory."""

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def admit_name(name: str) -> str:
    """``name`` if it is an import adapter name, else ``hf_trl_import_invalid``."""
    try:
        return check_import_name(name)
    except KilnError:
        raise ApiHfImportInvalid(
            f"adapter name {snippet(name)} is not 1..128 ASCII characters: a letter or digit, "
            "then letters, digits, '.', '_' or '-', with no '..'"
        ) from None


def _one(values: Sequence[str], header: str) -> str | None:
    if len(values) > 1:
        raise ApiHfImportInvalid(f"{header} must appear at most once")
    return values[0] if values else None


def check_headers(
    content_type: Sequence[str], content_encoding: Sequence[str], content_length: Sequence[str]
) -> None:
    """The three headers' values (every occurrence of each), refused unless Kiln admits them."""
    kind = _one(content_type, "Content-Type")
    if kind is None or kind.split(";")[0].strip().lower() != "application/gzip":
        raise ApiHfImportInvalid(
            f"Content-Type must be application/gzip, not {snippet(kind or '(none)')}"
        )
    encoding = _one(content_encoding, "Content-Encoding")
    if encoding is not None and encoding.strip().lower() != "identity":
        raise ApiHfImportInvalid(
            f"Content-Encoding must be absent or identity, not {snippet(encoding)}"
        )
    length = _one(content_length, "Content-Length")
    if length is not None:
        text = length.strip()
        if not (text.isascii() and text.isdigit()):
            raise ApiHfImportInvalid(f"Content-Length {snippet(length)} is not a decimal number")
        if int(text) > MAX_IMPORT_COMPRESSED_BYTES:
            raise ApiHfImportInvalid(
                f"the body declares {int(text)} bytes, more than MAX_IMPORT_COMPRESSED_BYTES = "
                f"{MAX_IMPORT_COMPRESSED_BYTES}"
            )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def receive_body(chunks: AsyncIterator[bytes], staging: Path) -> int:
    """Stream the request body into ``staging/envelope.tar.gz`` (created new, 0600, synced);
    returns its size. The caller removes ``staging`` whatever happens."""
    idle = HTTP_IMPORT_BODY_IDLE_TIMEOUT_S
    cap = MAX_IMPORT_COMPRESSED_BYTES
    fd = os.open(staging / ARCHIVE_NAME, _NEW_FILE, 0o600)
    try:
        total = 0
        pending = bytearray()
        iterator = aiter(chunks)
        while True:
            try:
                chunk = await asyncio.wait_for(anext(iterator), timeout=idle)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise ApiHfImportTimeout(
                    f"no body bytes arrived for {idle:g} s (HTTP_IMPORT_BODY_IDLE_TIMEOUT_S); "
                    "nothing was installed"
                ) from None
            total += len(chunk)
            if total > cap:
                raise ApiHfImportInvalid(
                    f"the body exceeds MAX_IMPORT_COMPRESSED_BYTES = {cap} bytes; nothing was "
                    "installed"
                )
            pending += chunk
            if len(pending) >= HASH_CHUNK_BYTES:
                await asyncio.to_thread(_write_all, fd, bytes(pending))
                pending.clear()
        if total == 0:
            raise ApiHfImportInvalid("the body is empty; send the envelope's gzip tar")
        if pending:
            await asyncio.to_thread(_write_all, fd, bytes(pending))
        await asyncio.to_thread(os.fsync, fd)
        return total
    finally:
        os.close(fd)
