"""Run a release's ``openenv init`` and serve the package it generated, in one interpreter.

``openenv init`` imports the release's whole CLI, ``openenv.core.env_server`` (gradio
included) among it: about 4 s of CPU, the very import the generated ``server/app.py``
needs next. As two processes (the console script, then ``serve_app.py``) a peer paid for
it twice. Here the release's own console script runs in this process first, by path as
its shebang would run it (``runpy``, the same arguments, its directory heading
``sys.path``, the output directory as working directory); once it has exited 0 and
``server/app.py`` exists, ``serve_app.py`` runs exactly as it does as a script
(``uvicorn server.app:app`` from the package directory, gradio included, the base URL
printed once it listens). What ``openenv init`` leaves in the process is modules of its
CLI (openai, fastmcp, requests ...: all installed either way) and urllib3's warning
filters and library loggers; the environment, signal handlers and root logger are as they were,
and nothing the generated package serves changes (the tests pin its every verdict).

It imports only the standard library, so any interpreter can run it by path:

    python init_then_serve.py OPENENV_SCRIPT NAME OUTPUT_DIR [serve_app.py options]

A failed ``openenv init`` (or one that generated no ``server/app.py``) exits non-zero
before anything listens, its output above the message in the server log.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

SERVE_APP = Path(__file__).resolve().parent / "serve_app.py"
APP = "server.app:app"


def openenv_init(script: Path, name: str, output_dir: Path) -> Path:
    """``openenv init NAME --output-dir OUTPUT_DIR`` through ``script`` in this process;
    the generated package's directory."""
    saved_path = list(sys.path)
    sys.argv = [str(script), "init", name, "--output-dir", str(output_dir)]
    sys.path[0] = str(script.parent)
    os.chdir(output_dir)
    code: object = 0
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code
    finally:
        sys.path[:] = saved_path
    package = output_dir / name
    if code not in (0, None) or not (package / "server" / "app.py").is_file():
        raise SystemExit(f"openenv init {name} failed ({code}): no {package}/server/app.py")
    return package


def main(argv: Sequence[str]) -> None:
    if len(argv) < 3:
        raise SystemExit("usage: init_then_serve.py OPENENV_SCRIPT NAME OUTPUT_DIR [OPTIONS]")
    script, name, output_dir, *options = argv
    package = openenv_init(Path(script), name, Path(output_dir).resolve())
    sys.stdout.flush()
    sys.argv = [str(SERVE_APP), *options, str(package), APP]
    runpy.run_path(str(SERVE_APP), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
