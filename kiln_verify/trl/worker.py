"""A spawned process that builds and replays the recorder's GRPO corpora.

Building a recorded batch's corpus (its rows, their canonical bytes read back and
validated, and ``hf verify``'s token replay through the exported tokenizer and template) is
pure Python: about 12 ms a step for the benchmark's 4 completions (docs/performance.md,
"TRL recording overhead"), growing with every completion and token. On the training
thread it delays the step by as much, and a thread would only take turns with TRL for the
interpreter lock. The recorder therefore submits it, once the batch is fully captured, to
one worker process per Python process, started with ``spawn`` (a fresh interpreter, never
a fork of a process that holds torch's threads), and collects it in
``on_pre_optimizer_step``: the corpus is built on another core while TRL runs the batch's
backward pass, and a corpus the rules or the replay refuse still fails the step before
``optimizer.step()``.

The worker keeps one :class:`~kiln_verify.hf.replay.TokenReplay` per tokenizer and template
it was sent (a first job loads them), so a step's job carries only the batch. A refusal
comes back as the same exception with its code (errors pickle); a worker that died fails
the step (``trl_recording_failed``), and the next job starts a fresh one.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, ClassVar

from kiln_verify.errors import TrlRecordingFailed
from kiln_verify.hf.replay import TokenReplay
from kiln_verify.trl.corpus import TrlCompletion, grpo_rows

__all__ = ["CorpusWorker"]

_REPLAYS: dict[str, TokenReplay] = {}
"""In the worker: the token replays it was sent, by :attr:`CorpusWorker.key`."""


def _load(key: str, tokenizer: bytes, template: bytes) -> None:
    if key not in _REPLAYS:
        _REPLAYS[key] = TokenReplay(tokenizer, template)


def _corpus(key: str, completions: list[TrlCompletion], options: dict[str, Any]) -> bytes:
    replay = _REPLAYS.get(key)
    if replay is None:
        raise TrlRecordingFailed("the corpus worker was not sent this model's tokenizer")
    return grpo_rows(completions, replay=replay, **options)


class CorpusWorker:
    """One model directory's view of the process-wide worker (see the module text)."""

    _guard: ClassVar[threading.Lock] = threading.Lock()
    _pool: ClassVar[concurrent.futures.ProcessPoolExecutor | None] = None
    _generation: ClassVar[int] = 0

    def __init__(self, tokenizer: bytes, template: bytes) -> None:
        self.key = hashlib.sha256(tokenizer + b"\0" + template).hexdigest()
        self._tokenizer, self._template = tokenizer, template
        self._loaded = -1
        self._load()

    @classmethod
    def _executor(cls) -> tuple[concurrent.futures.ProcessPoolExecutor, int]:
        with cls._guard:
            if cls._pool is None:
                cls._pool = concurrent.futures.ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn")
                )
                cls._generation += 1
            return cls._pool, cls._generation

    @classmethod
    def _broken(cls, generation: int) -> TrlRecordingFailed:
        with cls._guard:
            if cls._pool is not None and cls._generation == generation:
                cls._pool.shutdown(wait=False, cancel_futures=True)
                cls._pool = None
        return TrlRecordingFailed(
            "the corpus worker process exited; the step records nothing (a fresh worker "
            "starts with the next recorded step)"
        )

    def _submit(self, function: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        pool, generation = self._executor()
        try:
            future = pool.submit(function, *args)
        except (BrokenProcessPool, RuntimeError):
            raise self._broken(generation) from None
        future.generation = generation  # type: ignore[attr-defined]
        return future

    def _load(self) -> None:
        _pool, generation = self._executor()
        if self._loaded != generation:
            self._submit(_load, self.key, self._tokenizer, self._template)
            self._loaded = generation

    def corpus(
        self, completions: list[TrlCompletion], options: dict[str, Any]
    ) -> concurrent.futures.Future[bytes]:
        """Start building the corpus of ``completions`` (``grpo_rows``' keywords but
        ``replay`` in ``options``); collect it with :meth:`result`."""
        self._load()
        return self._submit(_corpus, self.key, completions, options)

    def result(self, future: concurrent.futures.Future[bytes]) -> bytes:
        """The corpus bytes, or the refusal raised where it was built."""
        try:
            return future.result()
        except BrokenProcessPool:
            raise self._broken(getattr(future, "generation", -1)) from None
