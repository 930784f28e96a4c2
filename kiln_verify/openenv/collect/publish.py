"""The bundle's files are published together or not at all: the one publisher
(:mod:`kiln_verify.core.publisher`) with the bundle's ``--force`` wording.

The three (or four) files are separate paths, possibly in different directories, so no
single rename can publish them: they are staged in a locked staging directory per parent,
journaled, renamed into place (``--force`` sets existing originals aside until the commit
point) and the journal removed; a failure takes everything back, and what a killed
publication left is undone by the next publication or target check (docs/contract.md,
"Collection"). These two names are the collection package's public entry points.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from kiln_verify.core import publisher

__all__ = ["check_targets", "publish_together"]


def check_targets(
    paths: Sequence[str | os.PathLike[str]], *, force: bool = False, create_parents: bool = False
) -> None:
    """Publication's checks alone, before any work: every target passes exactly the checks
    (and gives exactly the errors) :func:`publish_together` would, or this raises.

    ``create_parents``: a parent directory that does not exist yet is one the caller will
    create (``mkdir -p``); then its nearest existing ancestor must be a directory.
    """
    publisher.check_targets(
        paths, force=force, create_parents=create_parents, wording=publisher.OUTPUT
    )


def publish_together(
    files: Sequence[tuple[str | os.PathLike[str], bytes]], *, force: bool = False, mode: int = 0o644
) -> None:
    """Create every ``(path, data)`` file, all or none."""
    publisher.publish_files(files, force=force, mode=mode, wording=publisher.OUTPUT)
