"""Progress and interruption for the long collection commands (rollout, evaluate).

On a terminal a rich bar shows groups and episodes; off a terminal (CI logs, pipes) one
plain line at most every ``PROGRESS_LINE_INTERVAL_S`` seconds says how far the work is,
so a long run is never silent and a short one prints nothing. SIGINT and SIGTERM cancel
the work cooperatively (sessions are closed, staging files removed) and become one
``interrupted`` error: what was stopped, how many groups had completed and what, if
anything, was published. A signal that arrives once publication has begun is held until
the (synchronous, all-or-nothing) publication has finished, so a reported "nothing was
published" is always true.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TextIO, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kiln_verify.errors import Interrupted
from kiln_verify.limits import PROGRESS_LINE_INTERVAL_S
from kiln_verify.openenv.collect import ProgressEvent, ProgressHook

__all__ = ["CollectionProgress", "run_interruptible"]

T = TypeVar("T")
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(slots=True)
class CollectionProgress:
    """Counts what a collection (or the two of an evaluation) has finished so far."""

    what: str
    groups: int
    episodes: int
    clock: Callable[[], float] = time.monotonic
    stream: TextIO | None = None
    interval: float | None = None  # PROGRESS_LINE_INTERVAL_S
    done_groups: int = 0
    done_episodes: int = 0
    published: int = 0
    publishing: bool = False
    _base_groups: int = 0
    _base_episodes: int = 0
    _started: float = field(default=0.0)
    _last_line: float = field(default=0.0)

    def __post_init__(self) -> None:
        self._started = self._last_line = self.clock()
        if self.interval is None:
            self.interval = PROGRESS_LINE_INTERVAL_S

    def record(self, event: ProgressEvent) -> None:
        """Fold one engine event into the counts (collections run one after another)."""
        if event.stage == "group":
            self.done_groups = self._base_groups + event.completed
        elif event.stage == "episode":
            self.done_episodes = self._base_episodes + event.completed
        elif event.stage == "publishing":
            self.publishing = True
        elif event.stage == "published":
            self.publishing = False
            self.published += 1
            self._base_groups, self._base_episodes = self.done_groups, self.done_episodes

    def line(self) -> str:
        elapsed = self.clock() - self._started
        return (
            f"{self.what}: {self.done_groups}/{self.groups} groups, "
            f"{self.done_episodes}/{self.episodes} episodes, {elapsed:.0f} s elapsed"
        )

    def lines_hook(self, event: ProgressEvent) -> None:
        """The off-terminal renderer: count, and print a line when one is due."""
        self.record(event)
        now = self.clock()
        if now - self._last_line >= (self.interval or 0.0):
            self._last_line = now
            print(self.line(), file=self.stream or sys.stderr, flush=True)

    def interrupted(self, signame: str, outputs: str) -> Interrupted:
        kept = (
            "nothing was published"
            if self.published == 0
            else f"{self.published} bundle(s) had been published before it ({outputs})"
        )
        return Interrupted(
            f"{self.what} stopped by {signame} after {self.done_groups} of {self.groups} "
            f"groups had completed; {kept}",
            hint="run the command again to collect from the start",
        )

    @contextlib.contextmanager
    def renderer(self, *, terminal: bool) -> Iterator[ProgressHook]:
        """The hook to hand the engine: a bar on a terminal, else progress lines."""
        if not terminal:
            yield self.lines_hook
            return
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())  # fmt: skip
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            groups = bar.add_task("groups", total=self.groups)
            episodes = bar.add_task("episodes", total=self.episodes)

            def hook(event: ProgressEvent) -> None:
                self.record(event)
                bar.update(groups, completed=self.done_groups)
                bar.update(episodes, completed=self.done_episodes)
                if event.stage not in ("group", "episode"):
                    bar.update(groups, description=f"groups ({event.stage})")

            yield hook


def run_interruptible(
    work: Callable[[], Awaitable[T]], progress: CollectionProgress, *, outputs: str
) -> T:
    """``asyncio.run(work())`` with SIGINT/SIGTERM turned into :class:`Interrupted`."""
    received: list[str] = []

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: signal.Signals) -> None:
            if not received:
                received.append(signum.name)
            if not progress.publishing:  # publication finishes; see the module docstring
                task.cancel()

        installed = []
        for signum in _SIGNALS:
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(signum, stop, signum)
                installed.append(signum)
        try:
            return await work()
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    try:
        result = asyncio.run(main())
    except (asyncio.CancelledError, KeyboardInterrupt):
        if not received and not isinstance(sys.exc_info()[1], KeyboardInterrupt):
            raise
        raise progress.interrupted(received[0] if received else "SIGINT", outputs) from None
    if received:
        print(f"{received[0]} arrived while publishing; publication completed", file=sys.stderr)
    return result
