"""Generate an environment with OpenEnv's own template (``openenv init``) and serve it.

The generated package is code nobody here wrote: ``server/app.py`` calls ``create_app`` with
the template's defaults (``max_concurrent_envs=1``), the environment echoes a ``message``
and gives every reset a fresh ``uuid4()`` episode id. It is served the way its README
says (``uvicorn server.app:app`` from the package directory) through ``serve_app.py``,
by whichever interpreter owns the OpenEnv release: the suite's own (openenv 0.10.0) or a
separate virtual environment (``legacy_openenv.py``, openenv-core 0.3.0). That interpreter
runs the release's ``openenv init`` first, in the same process (``init_then_serve.py``).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks._common import PEER_START_TIMEOUT_S, ServerProcess, start_server_process

INIT_THEN_SERVE = Path(__file__).resolve().parent / "init_then_serve.py"
#: `openenv init` imports the whole CLI (gradio included): about 8 s on a busy 2-core box.
INIT_TIMEOUT_S = 180.0


def openenv_script(python: Path) -> Path:
    """The ``openenv`` console script installed beside ``python``."""
    script = python.parent / "openenv"
    if not script.is_file():
        raise FileNotFoundError(f"no openenv console script beside {python}")
    return script


def generate_and_serve(
    python: Path, name: str, output_dir: Path, *, label: str
) -> tuple[Path, ServerProcess]:
    """``openenv init NAME --output-dir OUTPUT_DIR``, then ``server.app:app`` of the generated
    package on a free loopback port; the package's directory and its server.

    One child of ``python`` does both (``init_then_serve.py``: the release's CLI and its
    server import the same ``openenv.core.env_server``, paid once). It exits with this
    process (its stdin is a pipe from here). A failed ``openenv init`` fails the start
    with its output in the message; the template's ``server/app.py`` is checked again here,
    so a template that changes shape fails with its own message rather than downstream.
    """
    argv = [
        str(python),
        str(INIT_THEN_SERVE),
        str(openenv_script(python)),
        name,
        str(output_dir),
        "--exit-on-stdin-eof",
    ]
    server = start_server_process(
        argv, label=label, timeout_s=INIT_TIMEOUT_S + PEER_START_TIMEOUT_S, keep_stdin_open=True
    )
    package = output_dir / name
    if not (package / "server" / "app.py").is_file():  # checked there too
        server.stop()
        raise RuntimeError(f"openenv init {name} generated no {package}/server/app.py")
    return package, server
