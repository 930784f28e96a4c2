"""A separate process that builds and replays the recorder's GRPO corpora.

Building a recorded batch's corpus (its rows, their canonical bytes read back and
validated, and ``hf verify``'s token replay through the exported tokenizer and template) is
pure Python: about 12 ms a step for the benchmark's 4 completions (docs/performance.md,
"TRL recording overhead"), growing with every completion and token. On the training
thread it delays the step by as much, and a thread would only take turns with TRL for the
interpreter lock. The recorder therefore submits it, once the batch is fully captured, to
one worker process per training process and collects it in ``on_pre_optimizer_step``: the
corpus is built on another core while TRL runs the batch's backward pass, and a corpus the
rules or the replay refuse still fails the step before ``optimizer.step()``.

The worker is ``python -m kiln_verify.trl.worker`` with the parent's ``sys.path``, talking
over its standard input and a duplicate of its standard output (length-prefixed pickles,
between two processes of the same program; anything a library prints goes to standard
error). Not ``multiprocessing``: its ``spawn`` and ``forkserver`` start methods import the
user's main module again in the child, which re-runs a training script that lacks an
``if __name__ == "__main__"`` guard, and ``fork`` copies a process holding torch's threads.
The worker keeps one :class:`~kiln_verify.hf.replay.TokenReplay` per tokenizer and template
it was sent, so a step's job carries only the batch. A refusal comes back as the same
exception with its code (errors pickle); a worker that died fails the step
(``trl_recording_failed``), and the next job starts another. It exits when its input
closes, that is with the training process.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import IO, Any, ClassVar

from kiln_verify.errors import TrlRecordingFailed
from kiln_verify.trl.corpus import TrlCompletion, grpo_rows

__all__ = ["CorpusWorker"]

_HEADER = struct.Struct(">Q")


def _write(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(header)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 (our own child process, never a peer)


class _Worker:
    """One running worker process and the jobs it has not answered yet."""

    def __init__(self) -> None:
        path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kiln_verify.trl.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self._input, self._output = self.process.stdin, self.process.stdout
        self._guard = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._next = 0
        self.loaded: set[str] = set()
        self.alive = True
        threading.Thread(target=self._answers, name="kiln-trl-corpus", daemon=True).start()

    def submit(self, *job: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._guard:
            if not self.alive:
                raise _exited()
            number, self._next = self._next, self._next + 1
            self._pending[number] = future
            try:
                _write(self._input, (number, *job))
            except (OSError, ValueError):
                self._pending.pop(number)
                self.alive = False
                raise _exited() from None
        return future

    def _answers(self) -> None:
        while True:
            try:
                number, ok, payload = _read(self._output)
            except (EOFError, OSError, ValueError, pickle.UnpicklingError):
                break
            with self._guard:
                future = self._pending.pop(number, None)
            if future is None:
                continue
            if ok:
                future.set_result(payload)
            else:
                future.set_exception(payload)
        with self._guard:
            self.alive = False
            pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(_exited())


def _exited() -> TrlRecordingFailed:
    return TrlRecordingFailed(
        "the corpus worker process exited; the step records nothing (a fresh worker starts "
        "with the next recorded step)"
    )


class CorpusWorker:
    """One model directory's view of the process-wide worker (see the module text)."""

    _guard: ClassVar[threading.Lock] = threading.Lock()
    _worker: ClassVar[_Worker | None] = None

    def __init__(self, tokenizer: bytes, template: bytes) -> None:
        self.key = hashlib.sha256(tokenizer + b"\0" + template).hexdigest()
        self._tokenizer, self._template = tokenizer, template
        self._running()

    @classmethod
    def process(cls) -> subprocess.Popen[bytes] | None:
        """The running worker process, if any (its CPU time is the recorder's)."""
        worker = cls._worker
        return worker.process if worker is not None and worker.alive else None

    def _running(self) -> _Worker:
        with self._guard:
            worker = type(self)._worker
            if worker is None or not worker.alive:
                worker = type(self)._worker = _Worker()
            if self.key not in worker.loaded:
                worker.submit("load", self.key, self._tokenizer, self._template)
                worker.loaded.add(self.key)
            return worker

    def corpus(
        self, completions: list[TrlCompletion], options: dict[str, Any]
    ) -> concurrent.futures.Future[bytes]:
        """Start building the corpus of ``completions`` (``grpo_rows``' keywords but
        ``replay`` in ``options``); its result is the corpus bytes, or the refusal raised
        where it was built."""
        return self._running().submit("corpus", self.key, completions, options)


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    from kiln_verify.hf.replay import TokenReplay

    replays: dict[str, TokenReplay] = {}
    while True:
        try:
            number, kind, key, *rest = _read(requests)
        except EOFError:
            return
        try:
            if kind == "load":
                if key not in replays:
                    replays[key] = TokenReplay(*rest)
                reply: tuple[int, bool, Any] = (number, True, None)
            else:
                replay = replays.get(key)
                if replay is None:
                    raise TrlRecordingFailed("the corpus worker was not sent this tokenizer")
                completions, options = rest
                reply = (number, True, grpo_rows(completions, replay=replay, **options))
        except Exception as exc:  # every refusal goes back to the step that asked
            reply = (number, False, exc)
        try:
            _write(replies, reply)
        except (pickle.PicklingError, TypeError, AttributeError):
            shown = type(reply[2]).__name__
            failed = TrlRecordingFailed(f"the corpus worker could not send back a {shown}")
            _write(replies, (number, False, failed))


if __name__ == "__main__":
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # what libraries print: standard error
    _serve(sys.stdin.buffer, replies)
