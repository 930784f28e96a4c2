"""The run kinds this server runs: the one table a new kind is added to.

``kind=train`` is accepted by the request record (a Kiln server runs it) but is not in
:data:`KINDS`, so the registry refuses it with ``openenv_run_kind_unsupported`` (501). A
later kind adds its module here and one entry to :data:`KINDS`; the registry, the store and
the artifact route do not change.
"""

from __future__ import annotations

from kiln_verify.control.kind import KindTable
from kiln_verify.control.kinds.rollout import ROLLOUT

__all__ = ["KINDS", "ROLLOUT"]

KINDS: KindTable = {ROLLOUT.name: ROLLOUT}
