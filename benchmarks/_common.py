"""Start and stop OpenEnv servers as subprocesses on loopback, for benchmarks and interop tests.

Both sides of every comparison run the same way: a child process that prints its base URL
(`http://127.0.0.1:PORT`, one line per server) once it listens, then answers `GET /health`.
The child's stdout and stderr go to a log file, never to an undrained pipe: the openenv
server logs a traceback whenever a client drops a socket without sending `close`, and a full
pipe would stall the server mid-benchmark. The log tail is attached to every start failure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The openenv 0.10.0 peer servers (`python openenv_peers.py NAME:MAX_SESSIONS ...`).
PEER_SCRIPT = REPO_ROOT / "tests" / "interop" / "openenv_peers.py"

_URL_LINE = re.compile(r"(http://127\.0\.0\.1:\d+)/?\s*$")
#: A peer process's start: `openenv.core.env_server` imports its web UI (gradio, about 3 s
#: of CPU) inside `try: ... except ModuleNotFoundError`, and no peer here enables that UI
#: (`ENABLE_WEB_INTERFACE` is unset), so the peers start as openenv does without gradio
#: installed: `sys.modules["gradio"] = None` makes that import fail at once. Nothing on the
#: wire changes; the `openenv init` peer (`tests/interop/serve_app.py`) still starts exactly
#: as its README says, gradio included. Then ``-m MODULE`` or a script path, as `python` takes it.
_PEER_BOOT = (
    "import runpy, sys; sys.modules['gradio'] = None; del sys.argv[0]; "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True) "
    "if sys.argv[0] == '-m' else runpy.run_path(sys.argv[0], run_name='__main__')"
)
PEER_START_TIMEOUT_S = 60.0
ORACLE_START_TIMEOUT_S = 30.0


class ServerStartError(RuntimeError):
    """A server process exited or did not become healthy in time; carries the log tail."""


@dataclasses.dataclass
class ServerProcess:
    """A running server child process and the base URLs it printed, in order."""

    label: str
    process: subprocess.Popen[bytes]
    urls: tuple[str, ...]
    log_path: Path

    @property
    def base_url(self) -> str:
        return self.urls[0]

    def log_tail(self, limit: int = 4000) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-limit:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout_s`; always reaps the child and its log."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=timeout_s)
        finally:
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
            with contextlib.suppress(OSError):
                self.log_path.unlink()


def child_environment(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The parent's environment minus anything that would change a server's surface."""
    env = dict(os.environ)
    # create_app mounts the Gradio UI (and its routes) when this is truthy.
    env.pop("ENABLE_WEB_INTERFACE", None)
    env.pop("OPENENV_MODE", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONHASHSEED"] = "0"
    if overrides:
        env.update(overrides)
    return env


def wait_for_health(base_url: str, deadline: float, process: ServerProcess | None = None) -> None:
    """Poll `GET /health` until it answers 200 or the deadline passes."""
    last_error = "no attempt"
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if process is not None and not process.alive():
                raise ServerStartError(
                    f"{process.label} exited with {process.process.returncode} before "
                    f"{base_url}/health answered\n{process.log_tail()}"
                )
            try:
                response = client.get(f"{base_url}/health")
            except httpx.HTTPError as exc:
                last_error = repr(exc)
            else:
                if response.status_code == 200:
                    return
                last_error = f"HTTP {response.status_code}"
            time.sleep(0.05)
    tail = process.log_tail() if process is not None else ""
    raise ServerStartError(f"{base_url}/health not ready: {last_error}\n{tail}")


def start_server_process(
    argv: Sequence[str],
    *,
    label: str,
    expected_urls: int = 1,
    timeout_s: float = ORACLE_START_TIMEOUT_S,
    keep_stdin_open: bool = False,
) -> ServerProcess:
    """Run `argv`, wait for `expected_urls` base-URL lines on its output and healthy servers.

    With `keep_stdin_open` the child gets a pipe as stdin that stays open until `stop()`;
    a child that exits on stdin EOF therefore dies with its parent, even on SIGKILL.
    """
    handle, name = tempfile.mkstemp(prefix=f"kiln-{label}-", suffix=".log")
    os.close(handle)
    log_path = Path(name)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if keep_stdin_open else subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_environment(),
            cwd=REPO_ROOT,
            start_new_session=True,
        )
    server = ServerProcess(label=label, process=process, urls=(), log_path=log_path)
    deadline = time.monotonic() + timeout_s
    try:
        urls: list[str] = []
        while len(urls) < expected_urls:
            if not server.alive():
                raise ServerStartError(
                    f"{label} exited with {process.returncode} during start-up\n{server.log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise ServerStartError(
                    f"{label} printed {len(urls)}/{expected_urls} base URLs within "
                    f"{timeout_s:.0f} s\n{server.log_tail()}"
                )
            urls = _printed_urls(log_path)
            if len(urls) < expected_urls:
                time.sleep(0.05)
        server.urls = tuple(urls[:expected_urls])
        for url in server.urls:
            wait_for_health(url, deadline, server)
    except BaseException:
        server.stop()
        raise
    return server


def _printed_urls(log_path: Path) -> list[str]:
    urls = []
    for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _URL_LINE.search(line)
        if match:
            urls.append(match.group(1))
    return urls


@dataclasses.dataclass(frozen=True)
class PeerSpec:
    """One openenv 0.10.0 peer server: an environment name, its `max_concurrent_envs`, and
    whether uvicorn accepts permessage-deflate (its default) or declines it."""

    name: str
    max_sessions: int = 8
    deflate: bool = True

    def argument(self) -> str:
        return f"{self.name}:{self.max_sessions}" + ("" if self.deflate else ":nodeflate")


def peer_command(*argv: str) -> list[str]:
    """`python ARGV...` (a peer script, or ``-m MODULE``) started without openenv's web UI
    (see `_PEER_BOOT`)."""
    return [sys.executable, "-c", _PEER_BOOT, *argv]


def start_openenv_peers(
    specs: Sequence[PeerSpec], *, timeout_s: float = PEER_START_TIMEOUT_S
) -> ServerProcess:
    """One child process hosting one openenv `create_app` server per spec, URLs in spec order.

    Several servers share a process so the openenv import is paid once; each still has
    its own app, `HTTPEnvServer`, socket and session table.
    """
    argv = peer_command(str(PEER_SCRIPT), "--exit-on-stdin-eof", *(s.argument() for s in specs))
    label = "openenv-" + "-".join(spec.name for spec in specs)
    return start_server_process(
        argv, label=label, expected_urls=len(specs), timeout_s=timeout_s, keep_stdin_open=True
    )


def oracle_command(name: str, *, max_sessions: int | None = None) -> list[str]:
    """`kiln-verify oracle serve NAME --port 0 [--max-sessions N]` with this interpreter."""
    argv = [
        sys.executable,
        "-c",
        "from kiln_verify.cli import main; main()",
        "oracle",
        "serve",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    if max_sessions is not None:
        argv += ["--max-sessions", str(max_sessions)]
    return argv


def start_oracle_process(
    name: str, *, max_sessions: int | None = None, timeout_s: float = ORACLE_START_TIMEOUT_S
) -> ServerProcess:
    """Our oracle server `name` in its own process, via the `kiln-verify oracle serve` CLI.

    The CLI binds port 0 itself and prints its base URL once `/health` answers.
    """
    return start_server_process(
        oracle_command(name, max_sessions=max_sessions),
        label=f"oracle-{name}",
        timeout_s=timeout_s,
    )


@contextlib.contextmanager
def running(server: ServerProcess) -> Iterator[ServerProcess]:
    """Stop `server` on exit, whatever happened inside."""
    try:
        yield server
    finally:
        server.stop()


# -- timing child processes (ratios against a baseline run in the same command) -------------


def children_cpu() -> float:
    """CPU seconds (user + system) of every reaped child so far: the number a loaded
    machine distorts least, because other processes' time slices do not count."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def kiln_verify_script() -> str:
    """The installed ``kiln-verify`` console script, as a user runs it."""
    script = Path(sys.executable).with_name("kiln-verify")
    found = str(script) if script.exists() else shutil.which("kiln-verify")
    if found is None:
        raise SystemExit("the kiln-verify console script is not installed (pip install -e .)")
    return found


def best_of(argv: Sequence[str], rounds: int) -> tuple[float, float]:
    """Best wall and best CPU seconds of ``argv`` run to success ``rounds`` times (its
    standard output discarded): ``sha256sum`` or the CLI, start-up and imports included."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(rounds):
        start, cpu = time.perf_counter(), children_cpu()
        subprocess.run(list(argv), check=True, stdout=subprocess.DEVNULL, cwd=REPO_ROOT)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, children_cpu() - cpu)
    return best, best_cpu


def best_child(code: str, argument: str, rounds: int) -> tuple[float, float]:
    """Best wall and CPU seconds that ``python -c code argument`` prints (``WALL CPU``):
    the timed part measured inside a fresh interpreter, without its start-up."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-c", code, argument],
            check=True,
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        )
        wall, cpu = (float(part) for part in out.stdout.split())
        best, best_cpu = min(best, wall), min(best_cpu, cpu)
    return best, best_cpu


# -- one collection plan, as the collector benchmarks take it --------------------------------

BUNDLE_NAMES = ("d.jsonl", "r.json", "s.json")
"""The three bundle files a benchmark's collection publishes (dataset, replay, summary)."""


def add_plan_arguments(parser: argparse.ArgumentParser, *, groups: int, rounds: int) -> None:
    """``--groups``, ``--group-size``, ``--steps``, ``--concurrency``, ``--rounds``: the plan
    every collector benchmark times (the oracle's own episodes, no thinking)."""
    parser.add_argument("--groups", type=int, default=groups)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=rounds)


def plan_controls(base_url: str, args: argparse.Namespace, directory: Path, **options: Any) -> Any:
    """The collector's controls for :func:`add_plan_arguments`' plan (and any other
    ``CollectionOptions`` field in ``options``), publishing :data:`BUNDLE_NAMES` into
    ``directory`` (replacing what a previous round left)."""
    from kiln_verify.openenv.collect import CollectionControls, CollectionOptions

    return CollectionControls.create(
        [base_url],
        options=CollectionOptions(
            groups=args.groups,
            group_size=args.group_size,
            max_steps=args.steps,
            concurrency=args.concurrency,
            thinking=False,
            **options,
        ),
        output=str(directory / BUNDLE_NAMES[0]),
        replay_output=str(directory / BUNDLE_NAMES[1]),
        summary_output=str(directory / BUNDLE_NAMES[2]),
        force=True,
    )
