"""Generate an environment with OpenEnv's own template (``openenv init``) and serve it.

The generated package is code nobody here wrote: ``server/app.py`` calls ``create_app`` with
the template's defaults (``max_concurrent_envs=1``), the environment echoes a ``message``
and gives every reset a fresh ``uuid4()`` episode id. It is served the way its README
says (``uvicorn server.app:app`` from the package directory) through ``serve_app.py``,
by whichever interpreter owns the OpenEnv release: the suite's own (openenv 0.10.0) or a
separate virtual environment (``legacy_openenv.py``, openenv-core 0.3.0).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks._common import (
    PEER_START_TIMEOUT_S,
    ServerProcess,
    child_environment,
    start_server_process,
)

SERVE_APP = Path(__file__).resolve().parent / "serve_app.py"
#: `openenv init` imports the whole CLI (gradio included): about 8 s on a busy 2-core box.
INIT_TIMEOUT_S = 180.0


def openenv_script(python: Path) -> Path:
    """The ``openenv`` console script installed beside ``python``."""
    script = python.parent / "openenv"
    if not script.is_file():
        raise FileNotFoundError(f"no openenv console script beside {python}")
    return script


def generate(python: Path, name: str, output_dir: Path) -> Path:
    """``openenv init NAME --output-dir OUTPUT_DIR``; the generated package's directory.

    The template's files are checked for what the tests rely on, so a template that
    changes shape fails here with its own message rather than somewhere downstream.
    """
    command = [str(openenv_script(python)), "init", name, "--output-dir", str(output_dir)]
    process = subprocess.run(command, capture_output=True, text=True, timeout=INIT_TIMEOUT_S,
                             env=child_environment(), cwd=output_dir, check=False)
    package = output_dir / name
    app = package / "server" / "app.py"
    if process.returncode != 0 or not app.is_file():
        raise RuntimeError(f"openenv init {name} failed ({process.returncode}):\n"
                           f"{process.stdout[-3000:]}\n{process.stderr[-3000:]}")
    return package


def serve(python: Path, package: Path, *, label: str) -> ServerProcess:
    """``server.app:app`` of a generated package on a free loopback port, in a child of
    ``python`` that exits with this process (its stdin is a pipe from here)."""
    argv = [str(python), str(SERVE_APP), "--exit-on-stdin-eof", str(package), "server.app:app"]
    return start_server_process(argv, label=label, timeout_s=PEER_START_TIMEOUT_S,
                                keep_stdin_open=True)
