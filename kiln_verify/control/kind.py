"""What a run kind declares, so the registry, the store and the artifact route stay generic.

A run kind (``rollout`` today, ``train`` next) is one :class:`RunKind` value:

``admit``
    the server's policy for a normalized request of this kind; returns the *controls* it
    computed (for ``rollout``, the collector's
    :class:`~kiln_verify.openenv.collect.CollectionControls`) or raises a typed refusal.
    The route admits once; the registry keeps the controls in memory and hands them to the
    executor, which re-admits only a run restored from disk (the configuration may have
    changed across the restart, and a refusal then is ``persisted_contract_invalid``).
``execute``
    runs one admitted run to a terminal state, given the controls (``None`` after a
    restart).
``progress``
    the run's first progress record, built from its request (the progress shape).
``artifacts``
    the kind's artifact table: artifact kind -> file in the run directory, its size cap and
    its media type. The artifact route serves only what the run's kind lists here *and* the
    run's persisted manifest binds.
``contract`` (optional)
    the ``kiln.openenv-training-contract.v1`` a run of this kind seals, from the controls
    its admission computed: the registry writes it into the run's first ``run.json``
    (:mod:`kiln_verify.control.training.seal`); a ``kind=train`` status must carry one.

The registry dispatches on ``request.kind`` through a :data:`KindTable`; a kind missing
from the table is ``openenv_run_kind_unsupported`` (501). This module imports nothing of
the registry, not even for typing (the executor's first argument, the registry itself, is
``Any`` here; each kind's executor names its real type), so a kind depends on the
registry and never the other way round, and the import graph has no cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.status import RunProgress
from kiln_verify.control.training.records import OpenEnvTrainingContract
from kiln_verify.errors import ApiRunKindUnsupported

__all__ = [
    "Admit",
    "ArtifactFile",
    "ArtifactTable",
    "Executor",
    "KindTable",
    "RunKind",
    "kind_of",
    "with_executor",
]

Admit = Callable[[OpenEnvRunRequest, ServerConfig], Any]
"""``(request, config) -> controls``, or a typed :class:`~kiln_verify.errors.ControlApiError`."""

Executor = Callable[[Any, str, Any], Coroutine[Any, Any, None]]
"""``(registry, run_id, controls or None)``: runs one admitted run to a terminal state."""


@dataclasses.dataclass(frozen=True, slots=True)
class ArtifactFile:
    """One artifact kind of a run kind: its file in the run directory, cap and media type."""

    name: str
    max_bytes: int
    content_type: str

    @property
    def extension(self) -> str:
        """The download's file-name extension (``jsonl`` for NDJSON, else ``json``)."""
        return "jsonl" if self.content_type == "application/x-ndjson" else "json"


ArtifactTable = Mapping[str, ArtifactFile]


@dataclasses.dataclass(frozen=True, slots=True)
class RunKind:
    """A run kind's declarations (see the module docstring)."""

    name: str
    admit: Admit
    execute: Executor
    progress: Callable[[OpenEnvRunRequest], RunProgress]
    artifacts: ArtifactTable
    contract: Callable[[Any], OpenEnvTrainingContract] | None = None


KindTable = Mapping[str, RunKind]

_TITLES: Final = {"train": "the training hand-off"}
"""Kinds the request record accepts that a server may not run (their refusal names them)."""


def kind_of(kinds: KindTable, name: str) -> RunKind:
    """The declaration of ``name``; ``openenv_run_kind_unsupported`` when none is served."""
    kind = kinds.get(name)
    if kind is None:
        title = _TITLES.get(name, "this run kind")
        raise ApiRunKindUnsupported(f"kind={name} ({title}) is not supported by this server")
    return kind


def with_executor(kinds: KindTable, execute: Executor) -> dict[str, RunKind]:
    """``kinds`` with every executor replaced (tests hold runs in a state this way)."""
    return {name: dataclasses.replace(kind, execute=execute) for name, kind in kinds.items()}
