"""A separate process for the recorder's work that TRL's training thread need not wait for.

Three jobs run there, each pure Python (or I/O) that would otherwise take turns with TRL
for the interpreter lock (a background thread only moves the cost around; docs/
performance.md, "TRL recording overhead: third pass", measured 1.11x with them on threads
of the training process and 1.02x without them):

* ``corpus``: a recorded batch's GRPO corpus (its rows, their canonical bytes read back and
  validated, and ``hf verify``'s token re-rendering through the exported tokenizer and template),
  about 12 ms a step for the benchmark's 4 completions and growing with every token.
  Submitted once the batch is fully captured and collected in ``on_pre_optimizer_step``, so
  it runs on another core during the backward pass and a refusal still fails the step
  before ``optimizer.step()``;
* ``inspect``: the environment's re-inspection after the batch's episodes (health and the
  four discovery documents over HTTP): the identity and schema come back for the training
  process to compare. The bearer credential, if any, travels in the job over the pipe
  (never printed or written; the worker is our own child);
* ``publish``: the checked files of a step's bundle, published atomically and without
  replacing anything (:func:`~kiln_verify.core.publish.publish_directory`), in step order.

The worker is ``python -m kiln_verify.trl.worker`` with the parent's ``sys.path``, talking
over its standard input and a duplicate of its standard output (length-prefixed pickles,
between two processes of the same program; anything a library prints goes to standard
error). Not ``multiprocessing``: its ``spawn`` and ``forkserver`` start methods import the
user's main module again in the child, which re-runs a training script that lacks an
``if __name__ == "__main__"`` guard, and ``fork`` copies a process holding torch's threads.
The worker keeps one :class:`~kiln_verify.hf.rerender.TokenRerender` per tokenizer and template
it was sent, so a step's job carries only the batch, and one OpenEnv client per server.
Jobs run one at a time in the order sent. A refusal comes back as the same exception with
its code (errors pickle); a worker that died fails the step (``trl_recording_failed``),
and the next job starts another. It exits when its input closes, that is with the training
process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar

from kiln_verify.errors import TrlRecordingFailed
from kiln_verify.trl.corpus import TrlCompletion, grpo_rows

if TYPE_CHECKING:
    from kiln_verify.hf.rerender import TokenRerender
    from kiln_verify.openenv.protocol.client import OpenEnvClient
    from kiln_verify.openenv.protocol.identity import EnvironmentIdentity

__all__ = ["RecordingWorker", "Reinspection"]

_HEADER = struct.Struct(">Q")
_PIPE_BYTES = 1 << 20
"""The job pipe's capacity where Linux allows it: a step's bundle (tens of KB for the
benchmark) is handed over without waiting for the worker to finish its previous job."""

Reinspection = tuple["EnvironmentIdentity", dict[str, Any]]
"""What a re-inspection returns: the environment's identity and its advertised schema."""


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
        with contextlib.suppress(ImportError, AttributeError, OSError):  # Linux only
            import fcntl  # elsewhere the default pipe works, a large job waits for the worker

            fcntl.fcntl(self.process.stdin.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        self._input, self._output = self.process.stdin, self.process.stdout
        self._guard = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._next = 0
        self.loaded: set[str] = set()
        self.alive = True
        threading.Thread(target=self._answers, name="kiln-trl-worker", daemon=True).start()

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
        "the recording worker process exited; the step records nothing (a fresh worker starts "
        "with the next recorded step)"
    )


class RecordingWorker:
    """One recorder's view of the process-wide worker (see the module text); ``rerender``:
    the exported tokenizer and chat template bytes its corpora are re-rendered through, if
    any."""

    _guard: ClassVar[threading.Lock] = threading.Lock()
    _worker: ClassVar[_Worker | None] = None

    def __init__(self, rerender: tuple[bytes, bytes] | None = None) -> None:
        self._rerender = rerender
        self.key = None if rerender is None else hashlib.sha256(b"\0".join(rerender)).hexdigest()
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
            key = self.key
            if self._rerender is not None and key is not None and key not in worker.loaded:
                worker.submit("load", key, *self._rerender)
                worker.loaded.add(key)
            return worker

    def corpus(
        self, completions: list[TrlCompletion], options: dict[str, Any]
    ) -> concurrent.futures.Future[bytes]:
        """Start building the corpus of ``completions`` (``grpo_rows``' keywords but
        ``rerender`` in ``options``); its result is the corpus bytes, or the refusal raised
        where it was built."""
        return self._running().submit("corpus", self.key, completions, options)

    def inspect(
        self, url: str, credential: Mapping[str, str] | None
    ) -> concurrent.futures.Future[Reinspection]:
        """Start re-inspecting ``url`` (``credential``: ``{variable: token}`` for a bearer,
        as :class:`~kiln_verify.openenv.protocol.client.OpenEnvClient` reads it); its result is the
        identity and schema, or the client's error."""
        return self._running().submit("inspect", None, url, dict(credential or {}))

    def publish(
        self, target: Path, files: Mapping[str, bytes], dir_mode: int
    ) -> concurrent.futures.Future[None]:
        """Start publishing ``files`` as ``target``; its result is ``None`` once written,
        or the publication's error (nothing was written)."""
        return self._running().submit("publish", None, str(target), dict(files), dir_mode)


class _Jobs:
    """What the worker keeps between jobs: token re-renderers and OpenEnv clients."""

    def __init__(self) -> None:
        self.rerenders: dict[str, TokenRerender] = {}
        self.clients: dict[tuple[str, str], OpenEnvClient] = {}
        self.loop = asyncio.new_event_loop()

    def run(self, kind: str, key: str | None, rest: list[Any]) -> Any:
        if kind == "load":
            from kiln_verify.hf.rerender import TokenRerender

            if key is not None and key not in self.rerenders:
                self.rerenders[key] = TokenRerender(*rest)
            return None
        if kind == "corpus":
            rerender = self.rerenders.get(key or "")
            if rerender is None:
                raise TrlRecordingFailed("the recording worker was not sent this tokenizer")
            completions, options = rest
            return grpo_rows(completions, rerender=rerender, **options)
        if kind == "inspect":
            url, credential = rest
            inspection = self.loop.run_until_complete(self._client(url, credential).inspect())
            return inspection.identity, inspection.environment_schema
        if kind == "publish":
            from kiln_verify.core.publish import publish_directory

            target, files, dir_mode = rest
            publish_directory(Path(target), files, dir_mode=dir_mode)
            return None
        raise TrlRecordingFailed(f"the recording worker has no job {kind!r}")

    def _client(self, url: str, credential: dict[str, str]) -> OpenEnvClient:
        from kiln_verify.openenv.protocol.client import OpenEnvClient

        name = next(iter(credential), None)  # at most one: the run's credential variable
        token = credential.get(name, "") if name is not None else ""
        key = (url, hashlib.sha256(f"{name}\0{token}".encode()).hexdigest())
        client = self.clients.get(key)
        if client is None:
            client = OpenEnvClient(url, credential_env=name, environ=credential)
            self.clients[key] = client
        return client


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    jobs = _Jobs()
    while True:
        try:
            number, kind, key, *rest = _read(requests)
        except EOFError:
            return
        try:
            reply: tuple[int, bool, Any] = (number, True, jobs.run(kind, key, rest))
        except Exception as exc:  # every refusal goes back to the step that asked
            reply = (number, False, exc)
        try:
            _write(replies, reply)
        except (pickle.PicklingError, TypeError, AttributeError):
            shown = type(reply[2]).__name__
            failed = TrlRecordingFailed(f"the recording worker could not send back a {shown}")
            _write(replies, (number, False, failed))


if __name__ == "__main__":
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # what libraries print: standard error
    _serve(sys.stdin.buffer, replies)
