"""The shapes callers publish in, over :func:`~kiln_verify.core.publisher.commit.publication`:
files from bytes (a bundle), sibling entries built in one staging directory (an HF
export), and the target checks a command makes before any work.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from kiln_verify.core.paths import validate_relative_path
from kiln_verify.core.publisher import recover
from kiln_verify.core.publisher.commit import publication
from kiln_verify.core.publisher.stage import write_all
from kiln_verify.core.publisher.targets import TARGET, Pathish, Wording, check_paths
from kiln_verify.errors import PublishFailed, snippet

__all__ = ["GroupStage", "check_targets", "publish_files", "staged_group"]


def publish_files(
    files: Sequence[tuple[Pathish, bytes | bytearray | memoryview]],
    *,
    force: bool = False,
    mode: int = 0o644,
    wording: Wording = TARGET,
) -> None:
    """Create every ``(path, data)`` file, all or none."""
    with publication([path for path, _ in files], force=force, wording=wording) as staging:
        for index, (_, data) in enumerate(files):
            staging.fill_file(index, mode, partial(write_all, data=data))


@dataclass(frozen=True, slots=True)
class GroupStage:
    """The private staging directory of :func:`staged_group`; build each entry at
    ``entry(name)``, and use ``path`` for scratch space that goes with it."""

    path: str

    def entry(self, name: str) -> str:
        return os.path.join(self.path, name)


@contextmanager
def staged_group(
    parent: Pathish,
    names: Sequence[str],
    *,
    key: str,
    before_commit: Callable[[], None] | None = None,
) -> Iterator[GroupStage]:
    """Sibling entries ``names`` (single path components) of ``parent``, built in one
    staging directory ``.KEY.staging-<token>`` and published together; ``before_commit``
    runs once they are all in place, and a failure there takes them back."""
    for name in (key, *names):
        if len(validate_relative_path(name)) != 1:
            raise PublishFailed(f"{snippet(name)} is not a single path component")
    paths = [os.path.join(os.fspath(parent), name) for name in names]
    with publication(paths, key=key, before_commit=before_commit) as staging:
        assert staging.path is not None  # a key always journals
        yield GroupStage(staging.path)


def check_targets(
    paths: Sequence[Pathish],
    *,
    force: bool = False,
    create_parents: bool = False,
    wording: Wording = TARGET,
) -> None:
    """Before any work: recover leftovers beside ``paths``, then every target passes
    exactly the checks (and gives exactly the errors) :func:`publication` would make.
    ``create_parents``: a missing parent is one the caller will create (``mkdir -p``)."""
    recover.recover(paths)
    check_paths(paths, force=force, create_parents=create_parents, wording=wording)
