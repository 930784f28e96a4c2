"""The adapter barrier: one lock per adapter directory, held while an adapter is published.

Two writers add adapters to ``<state_dir>/adapters/``: a train run's verified install
(:func:`~kiln_verify.control.resident.store.install_adapter`) and the HTTP PEFT import
(:mod:`kiln_verify.control.hf_imports`). Each publishes with a kernel no-replace rename, so
neither can replace the other's adapter; the barrier also makes their admission checks (the
name is free, the registry has room, the resident model holds no adapter of that name) and
the publication one step, as Kiln's adapter mutation guard does. It is a thread lock: both
writers publish from worker threads, never on the event loop.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["adapter_barrier"]

_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


@contextmanager
def adapter_barrier(root: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the barrier of the adapter directory ``root`` for the block (blocking)."""
    key = os.path.abspath(os.fspath(root))
    with _GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        yield
