"""``POST /v1/openenv/runs/{id}/resume``: a new attempt at an interrupted rollout run.

A kiln-verify extension (Kiln has no resume route and its run request no field naming an
earlier run). The seed's rule stays: a run admitted before a restart is ``failed`` with
``run_interrupted``. Its journal (``<run>/journal``, every group finished before the
kill, see :mod:`kiln_verify.control.executor`) is kept, and this route creates a **new**
run with the failed run's exact request, admitted again under the running server's
policy, whose executor continues that journal with ``--resume``'s checks
(:func:`~kiln_verify.openenv.collect.journaled.collect_journaled`): other controls, plan,
policy or environment identities end the new run ``failed`` with the journal's refusal in
its message, and the groups after the last whole entry are collected. The published
bundle is byte-identical to an uninterrupted run's with the same request.

The journal is **moved** (one ``rename`` within the runs root, both directories fsynced)
into the new run's directory before the new run can start, so exactly one run owns it; a
new attempt that is interrupted in turn is resumed the same way. The link is recorded in
our own record ``kiln-verify.openenv-run-resume.v1``: ``resumed-from.json`` in the new
run, ``resumed-as.json`` in the old one (its presence refuses a second resume). Kiln's
status records are unchanged: nothing in them says a run was resumed.

Refusals: an unknown run is ``openenv_run_not_found`` (404); a run that is not a rollout
run failed with ``run_interrupted``, or that was resumed already, is
``openenv_run_not_resumable`` (409); the request's admission refusals are the create
route's.

Crashes. The steps run in this order, synchronously on the event loop (no other request
sees a step half done): (1) the new run's ``run.json``, ``queued``; (2) its
``resumed-from.json``; (3) the old run's ``resumed-as.json``; (4) the ``rename`` of the
journal, then both directories fsynced. The **journal's location is the commit point**:
"resumed already" means ``resumed-as.json`` is present *and* the old run no longer holds a
``journal/`` directory (or never had one). A restart over any crash point therefore finds
exactly one run that continues the journal's groups, and nothing un-resumable that should
be resumable:

- crash after (1), (2) or (3): the journal is still the old run's, so the old run stays
  resumable (a later resume overwrites a stale ``resumed-as.json``) and its new attempt
  continues every journaled group. The new run is a pristine ``queued`` run, which a
  restart queues again (it was never admitted, so the seed's ``run_interrupted`` rule
  does not touch it): it collects from group 0 into its own journal and publishes the
  same bytes (more work, nothing lost).
- crash after (4), before or after the fsyncs: the journal is the new run's; the old run
  is refused (``openenv_run_not_resumable``), and the restarted new run continues the
  journal and publishes the uninterrupted bytes. Once admitted, a new run interrupted in
  turn is ``run_interrupted`` and resumable the same way.

``tests/control/test_resume_crash.py`` kills a server at each of these points and checks
what a restart finds and the bytes every surviving attempt publishes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

from kiln_verify.control.layout import RESUMED_AS_FILE, RESUMED_FROM_FILE, RUN_JOURNAL_DIR
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.core.jsonenc import dumps_pretty
from kiln_verify.core.publish import fsync_dir, replace_bytes
from kiln_verify.errors import ApiRunNotResumable

__all__ = ["RESUME_SCHEMA", "resume_run"]

RESUME_SCHEMA: Final = "kiln-verify.openenv-run-resume.v1"

_RESUMABLE_KINDS: Final = frozenset({"rollout"})


def _record(resumed_from: str, resumed_as: str) -> bytes:
    return dumps_pretty(
        {"schema": RESUME_SCHEMA, "resumed_from": resumed_from, "resumed_as": resumed_as}
    )


def _check(registry: RunRegistry, status: OpenEnvRunStatus) -> None:
    run_id = status.run_id
    failure = status.failure
    if status.kind not in _RESUMABLE_KINDS:
        raise ApiRunNotResumable(f"run {run_id} is kind={status.kind}; only rollout runs resume")
    if status.state != "failed" or failure is None or failure.code != "run_interrupted":
        why = failure.code if failure is not None else status.state
        raise ApiRunNotResumable(
            f"run {run_id} ended {status.state} ({why}); only a run failed with "
            "run_interrupted can be resumed"
        )
    run_dir = registry.store.run_dir(run_id)
    marker = run_dir / RESUMED_AS_FILE
    if (marker.exists() or marker.is_symlink()) and not _holds_journal(run_dir):
        raise ApiRunNotResumable(f"run {run_id} was resumed already (see its {RESUMED_AS_FILE})")


def _holds_journal(run_dir: Path) -> bool:
    """Whether ``run_dir`` still owns a journal to hand over: the commit point of a resume
    (a ``resumed-as.json`` beside a journal was left by a resume that crashed before its
    move)."""
    journal = run_dir / RUN_JOURNAL_DIR
    return journal.is_dir() and not journal.is_symlink()


def _move_journal(old_dir: Path, new_dir: Path) -> None:
    """The commit: one ``rename``, then both directories fsynced. On an error the journal
    stays (or goes back) with the old run, which stays resumable, before the caller
    withdraws the new run's directory."""
    source, target = old_dir / RUN_JOURNAL_DIR, new_dir / RUN_JOURNAL_DIR
    try:
        os.rename(source, target)
    except OSError:
        (old_dir / RESUMED_AS_FILE).unlink(missing_ok=True)
        raise
    try:
        fsync_dir(old_dir)
        fsync_dir(new_dir)
    except OSError:
        with contextlib.suppress(OSError):
            os.rename(target, source)
        (old_dir / RESUMED_AS_FILE).unlink(missing_ok=True)
        raise


def resume_run(registry: RunRegistry, run_id: str) -> OpenEnvRunStatus:
    """Queue the new attempt at ``run_id`` and return its status (see the module)."""
    old = registry.get(run_id)
    _check(registry, old)
    controls = registry.admit(old.request)
    old_dir = registry.store.run_dir(run_id)

    def prepare(new_id: str) -> None:
        # the order is the module's "Crashes": the rename is the last step and the commit
        new_dir = registry.store.run_dir(new_id)
        record = _record(run_id, new_id)
        replace_bytes(new_dir / RESUMED_FROM_FILE, record)
        replace_bytes(old_dir / RESUMED_AS_FILE, record)
        if _holds_journal(old_dir):
            _move_journal(old_dir, new_dir)

    return registry.submit_new(old.request, controls, prepare)
