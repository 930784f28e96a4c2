"""A fork server for ``kiln-verify`` children: the CLI imported once, each child forked.

A ``kiln-verify`` process spends about a second of CPU importing itself; the SIGKILL
resume test needs more than thirty children, so it starts this server once per module
and has it fork each child from an already-imported CLI. A child is the console script's
``main()`` in its own process (its own pid, killed with SIGKILL like any other), with
``argv``, working directory and stdout/stderr files given by the test.

Protocol, one JSON line each way: the test writes ``{"cwd", "argv", "out"}``; the server
answers ``{"pid"}`` once the child runs and ``{"status"}`` (the exit code, or minus the
signal) once it ended. An empty line asks for ``{"cpu"}``: this server's CPU seconds and
its children's, together.
"""

from __future__ import annotations

import json
import os
import resource
import sys


def _child(request: dict[str, object]) -> None:
    from kiln_verify.cli import main

    os.chdir(str(request["cwd"]))
    fd = os.open(str(request["out"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.argv = ["kiln-verify", *(str(word) for word in request["argv"])]  # type: ignore[attr-defined]
    code = 0
    try:
        main()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def serve() -> None:
    import kiln_verify.cli
    import kiln_verify.cli.openenv_rollout
    import kiln_verify.openenv.collect.journaled
    import kiln_verify.openenv.collect.run  # noqa: F401  (imported before any fork)

    for line in sys.stdin:
        if not line.strip():
            used = resource.getrusage(resource.RUSAGE_SELF)
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = used.ru_utime + used.ru_stime + kids.ru_utime + kids.ru_stime
            print(json.dumps({"cpu": cpu}), flush=True)
            continue
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"status": code}), flush=True)


if __name__ == "__main__":
    serve()
