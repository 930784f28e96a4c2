"""A virtual environment holding openenv-core 0.3.0, built from PyPI once per machine.

openenv-core 0.3.0 (the last release before ``/list_environments``) and openenv 0.10.0 both
install the module ``openenv``, so the older one cannot join the suite's environment. It
gets its own: ``pip install openenv-core==0.3.0`` with its declared dependencies (gradio
and fastmcp included, as a deployment has them), constrained by the repository's
``constraints.txt`` to the versions the suite is measured with. Measured on the 2-core
development box: about 50 s and 475 MB, once; later sessions reuse it.

The directory is keyed by the requirement, the interpreter and the bytes of
``constraints.txt`` (a change there builds a new one), lives under
``$KILN_PEER_VENV_DIR`` (default: ``<tmp>/kiln-verify-peer-venvs``), is built under a file
lock (parallel sessions wait instead of racing) and counts only once a marker file is
written after an import check: a build that died half way is removed and redone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks._common import REPO_ROOT, child_environment

REQUIREMENT = "openenv-core==0.3.0"
VERSION = "0.3.0"
CONSTRAINTS = REPO_ROOT / "constraints.txt"
VENV_DIR_VARIABLE = "KILN_PEER_VENV_DIR"
MARKER = ".kiln-peer-complete"
#: pip downloads about 475 MB; generous for a slow mirror, and the test is marked slow.
BUILD_TIMEOUT_S = 900.0
_CHECK = (
    "import importlib.metadata, openenv.core.env_server.http_server; "
    "print(importlib.metadata.version('openenv-core'))"
)


class PeerEnvironmentError(RuntimeError):
    """The peer's virtual environment could not be built; carries pip's output tail."""


def cache_root() -> Path:
    configured = os.environ.get(VENV_DIR_VARIABLE)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / "kiln-verify-peer-venvs"


def venv_key() -> str:
    """``openenv-core-0.3.0-py311-<12 hex>``: requirement, interpreter and constraints."""
    digest = hashlib.sha256()
    digest.update(REQUIREMENT.encode() + b"\0" + sys.version.encode() + b"\0")
    digest.update(CONSTRAINTS.read_bytes())
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    return f"openenv-core-{VERSION}-{python}-{digest.hexdigest()[:12]}"


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(command: list[str], log: list[str]) -> None:
    process = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                             env=child_environment({"PIP_DISABLE_PIP_VERSION_CHECK": "1"}),
                             check=False)
    log.append(f"$ {' '.join(command)}\n{process.stdout[-2000:]}{process.stderr[-4000:]}")
    if process.returncode != 0:
        raise PeerEnvironmentError(f"building the {REQUIREMENT} environment failed:\n"
                                   + "\n".join(log)[-6000:])


def _build(venv: Path) -> None:
    log: list[str] = []
    _run([sys.executable, "-m", "venv", str(venv)], log)
    python = str(python_of(venv))
    _run([python, "-m", "pip", "install", "--quiet", "-c", str(CONSTRAINTS), REQUIREMENT], log)
    check = subprocess.run([python, "-c", _CHECK], capture_output=True, text=True,
                           timeout=120, env=child_environment(), check=False)
    if check.returncode != 0 or check.stdout.strip() != VERSION:
        raise PeerEnvironmentError(f"{venv} does not import openenv-core {VERSION}:\n"
                                   f"{check.stdout[-2000:]}{check.stderr[-4000:]}")


def openenv_core_030() -> Path:
    """The environment's directory, building it first if no complete one exists."""
    venv = cache_root() / venv_key()
    with _locked(venv.with_name(venv.name + ".lock")):
        if (venv / MARKER).is_file():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        started = time.monotonic()
        try:
            _build(venv)
        except BaseException:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        (venv / MARKER).write_text(f"built in {time.monotonic() - started:.1f} s\n",
                                   encoding="utf-8")
    return venv
