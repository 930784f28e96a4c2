"""One asyncio event loop on a daemon thread, for TRL's synchronous environment calls.

TRL calls ``reset``, the tools and ``get_reward`` synchronously from its training loop,
while kiln-verify's OpenEnv client is asyncio (a WebSocket session belongs to the loop
that opened it). So every session of a process lives on one loop running in a background
thread, and each synchronous call submits a coroutine to it and waits for the result:
sessions stay alive between calls (the client's keep-alive pump runs there while the model
generates), and one loop serves every environment instance, as the collector's one loop
serves every candidate.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from kiln_verify.limits import TRL_EPISODE_TIMEOUT_S

__all__ = ["BackgroundLoop"]

T = TypeVar("T")


class BackgroundLoop:
    """A started event loop on a daemon thread; :meth:`run` blocks on one coroutine."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kiln-trl-loop", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop without waiting for it."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("BackgroundLoop called from its own thread")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = TRL_EPISODE_TIMEOUT_S) -> T:
        """Run ``coro`` on the loop and return its result (its exception propagates)."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        """Stop the loop and join its thread (pending sessions are the caller's to close)."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
