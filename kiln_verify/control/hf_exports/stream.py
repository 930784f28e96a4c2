"""The download body: the export's deterministic ``.tar.gz``, compressed while it is sent.

A worker thread runs the project's deterministic archive writer
(:func:`~kiln_verify.core.tar_write.write_tar_gz`: sorted USTAR entries under the single
root ``NAME.kiln-hf``, mtime 0, fixed modes, gzip level 6), so the bytes served are exactly
the ``NAME.kiln-hf.tar.gz`` a local ``kiln-verify hf export-*`` of the same inputs
publishes. Its output is cut into ``HASH_CHUNK_BYTES`` chunks and handed over through a
queue of at most ``HTTP_EXPORT_STREAM_CHUNKS``: the archive is never held whole, and a slow
reader slows the compressor instead of growing memory. Closing the iterator early (the
client went away) stops the writer at its next chunk.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator
from pathlib import Path

from kiln_verify.core.tar_write import write_tar_gz
from kiln_verify.limits import HASH_CHUNK_BYTES, HTTP_EXPORT_STREAM_CHUNKS

__all__ = ["archive_chunks"]

_POLL_S = 0.1


class _Stopped(Exception):
    """The reader is gone; the writer thread unwinds."""


class _Sink:
    """A write-only binary stream that queues fixed-size chunks for the reader."""

    def __init__(self, chunks: queue.Queue[bytes | BaseException | None]) -> None:
        self._chunks = chunks
        self._buffer = bytearray()
        self.stopped = threading.Event()

    def put(self, item: bytes | BaseException | None) -> None:
        while True:
            if self.stopped.is_set():
                raise _Stopped
            try:
                self._chunks.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._buffer += data
        while len(self._buffer) >= HASH_CHUNK_BYTES:
            self.put(bytes(self._buffer[:HASH_CHUNK_BYTES]))
            del self._buffer[:HASH_CHUNK_BYTES]
        return len(data)

    def flush(self) -> None:
        """Nothing to do: chunks are queued as they fill, the rest by :meth:`finish`."""

    def finish(self) -> None:
        if self._buffer:
            self.put(bytes(self._buffer))
            self._buffer.clear()


def _produce(directory: Path, root_name: str, sink: _Sink) -> None:
    try:
        write_tar_gz(directory, sink, root_name=root_name)  # type: ignore[arg-type]
        sink.finish()
        sink.put(None)
    except _Stopped:
        return
    except BaseException as exc:  # handed to the reader, which raises it
        try:
            sink.put(exc)
        except _Stopped:
            return


def _next(
    chunks: queue.Queue[bytes | BaseException | None], sink: _Sink
) -> bytes | BaseException | None:
    """The next item; ``None`` also when the reader stopped (a cancelled wait never
    leaves a thread blocked on the queue)."""
    while not sink.stopped.is_set():
        try:
            return chunks.get(timeout=_POLL_S)
        except queue.Empty:
            continue
    return None


async def archive_chunks(directory: Path, root_name: str) -> AsyncIterator[bytes]:
    """The archive of ``directory`` rooted at ``root_name``, chunk by chunk."""
    chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(HTTP_EXPORT_STREAM_CHUNKS)
    sink = _Sink(chunks)
    worker = threading.Thread(
        target=_produce, args=(directory, root_name, sink), name="hf-export-archive", daemon=True
    )
    worker.start()
    try:
        while True:
            item = await asyncio.to_thread(_next, chunks, sink)
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        sink.stopped.set()
        await asyncio.to_thread(worker.join)
