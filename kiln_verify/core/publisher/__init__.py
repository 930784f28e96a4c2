"""The one publisher: N files or directories, in one or several parent directories,
appear together or not at all, never replacing anything unless asked to.

- :mod:`.targets`: every target is checked before anything is written;
- :mod:`.stage`: where each entry is built (a private sibling, or a locked staging
  directory per parent);
- :mod:`.journal`: what a journaled commit published (and the journals of the two
  publishers this one replaced);
- :mod:`.commit`: the no-replace renames, the commit point, the rollback;
- :mod:`.recover`: undoing what a killed publication left, on the next publication or
  target check;
- :mod:`.front`: the shapes callers publish in (files from bytes, sibling entries, the
  checks before any work).

:mod:`kiln_verify.core.publish` (single files and directories) and the bundle's
``publish_together`` are front ends over :func:`publication`.
"""

from __future__ import annotations

from kiln_verify.core.publisher.commit import publication
from kiln_verify.core.publisher.front import (
    GroupStage,
    check_targets,
    publish_files,
    staged_group,
)
from kiln_verify.core.publisher.journal import JOURNAL
from kiln_verify.core.publisher.recover import recover, recover_group
from kiln_verify.core.publisher.stage import Staging, write_all
from kiln_verify.core.publisher.targets import OUTPUT, TARGET, Pathish, Wording

__all__ = [
    "JOURNAL",
    "OUTPUT",
    "TARGET",
    "GroupStage",
    "Pathish",
    "Staging",
    "Wording",
    "check_targets",
    "publication",
    "publish_files",
    "recover",
    "recover_group",
    "staged_group",
    "write_all",
]
