"""``kind=rollout``: collect with the library's collector and publish the three-file bundle.

Admission is :func:`~kiln_verify.control.admission.check_run_request` (its controls are
the collector's :class:`~kiln_verify.openenv.collect.CollectionControls`); execution,
progress and the artifact table live in :mod:`kiln_verify.control.executor`.
"""

from __future__ import annotations

from kiln_verify.control.admission import check_run_request
from kiln_verify.control.executor import ARTIFACTS, execute_run, rollout_progress
from kiln_verify.control.kind import RunKind

__all__ = ["ROLLOUT"]

ROLLOUT = RunKind(
    name="rollout",
    admit=check_run_request,
    execute=execute_run,
    progress=rollout_progress,
    artifacts=ARTIFACTS,
)
