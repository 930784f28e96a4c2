"""The child process of ``test_resume_crash``: the control plane, killed with SIGKILL at one
step of the resume route's ``prepare`` (:mod:`kiln_verify.control.resume`, "Crashes").

A crash at a chosen instruction is something no real peer can cause, so it is injected
here: the child wraps the route's own steps and kills itself before or after the named
one, leaving on disk exactly what a crash there leaves. Preloaded into a fork server with
:mod:`tests.control.kill_child`, whose server it runs.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from kiln_verify.control import resume
from kiln_verify.control.layout import RESUMED_AS_FILE, RESUMED_FROM_FILE
from kiln_verify.control.registry import RunRegistry
from kiln_verify.core import publish
from tests.control.kill_child import serve_child

POINTS: Final = ("created", "resumed_from", "resumed_as", "moved", "prepared")
"""Where the child dies: after the new run's ``run.json``; after its ``resumed-from.json``;
after the old run's ``resumed-as.json``; after the journal's ``rename``, before the
fsyncs; after the whole ``prepare``, before the registry tracks the new run."""

JOURNAL_MOVED: Final = frozenset({"moved", "prepared"})
"""The points after the commit (the journal belongs to the new run)."""


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _crash_at(point: str) -> None:
    real_replace = publish.replace_bytes
    real_fsync = resume.fsync_dir  # type: ignore[attr-defined]
    real_submit = RunRegistry.submit_new

    def replace_bytes(path: Path, data: bytes) -> None:
        if (point, path.name) in (
            ("created", RESUMED_FROM_FILE),
            ("resumed_from", RESUMED_AS_FILE),
        ):
            _die()
        real_replace(path, data)
        if (point, path.name) == ("resumed_as", RESUMED_AS_FILE):
            _die()

    def fsync_dir(path: Path) -> None:
        if point == "moved":
            _die()
        real_fsync(path)

    def submit_new(
        self: RunRegistry,
        request: Any,
        controls: Any = None,
        prepare: Callable[[str], None] | None = None,
    ) -> Any:
        def prepared(run_id: str) -> None:
            if prepare is not None:
                prepare(run_id)
            if point == "prepared":
                _die()

        return real_submit(self, request, controls, prepared)

    resume.replace_bytes = replace_bytes  # type: ignore[attr-defined,assignment]
    resume.fsync_dir = fsync_dir  # type: ignore[attr-defined,assignment]
    RunRegistry.submit_new = submit_new  # type: ignore[method-assign]


def serve_crashing(state_dir: str, ready: Connection, point: str) -> None:
    """:func:`tests.control.kill_child.serve_child`, dying at ``point`` of a resume."""
    assert point in POINTS, point
    _crash_at(point)
    serve_child(state_dir, ready)
