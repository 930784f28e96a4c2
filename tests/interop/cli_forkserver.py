"""Run ``kiln-verify`` commands one after another, each in a fresh process forked from here.

``cli_pipeline.py`` runs five commands per peer, each in its own process, as a user would
(``python -c "from kiln_verify.cli import main; main()" ARGS``). Four fifths of a cheap
command's CPU was the interpreter importing the same CLI stack again. This process imports
the modules named on its command line once and then, for each request line on stdin,
forks a child that becomes that command's process: its stdout and stderr are the
request's files, its stdin is ``/dev/null``, ``sys.argv`` is what ``python -c`` gives,
and it runs ``main()`` at the top level of this script, so its exit code, traceback and
shutdown (atexit handlers, non-daemon threads) are a script's. Nothing one command does
reaches the next: each child starts from this process's state right after the imports.
The exit code goes back as one line on stdout.

    python cli_forkserver.py MODULE...   (stdin: {"args": [...], "stdout": P, "stderr": P})
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any


def preload(modules: list[str]) -> None:
    for module in modules:
        importlib.import_module(module)


def become(request: dict[str, Any]) -> None:
    """Turn this (forked) process into the requested command's process."""
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(str(request["stdout"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for source, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(source, target)
        os.close(source)
    sys.argv = ["-c", *(str(arg) for arg in request["args"])]
    # a fresh reader: the inherited one may hold request lines read ahead
    sys.stdin = open(0, encoding=sys.stdin.encoding, errors=sys.stdin.errors, closefd=False)  # noqa: SIM115


def serve_requests() -> None:
    """Fork one child per request; only a child returns (the parent exits on stdin EOF)."""
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            become(request)
            return
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
    raise SystemExit(0)


if __name__ == "__main__":
    sys.path[0] = ""  # as `python -c`: the working directory, not this script's folder
    preload(sys.argv[1:])
    from kiln_verify.cli import main

    serve_requests()
    main()
