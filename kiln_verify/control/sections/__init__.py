"""The configuration file's sections, one per route family, each parsed by its own module.

=============  =====================  =====================================================
section        ``ServerConfig`` field  families it configures
=============  =====================  =====================================================
``[openenv]``  ``openenv``             runs, artifacts, inspection and tasks
``[policies]`` ``policies``            runs (the policy each request's adapter selects)
``[model]``    ``model``               runs, adapters (the resident model; absent: none)
=============  =====================  =====================================================

``[server]`` (host, port, state directory) belongs to the process, not to a family, and
stays in :mod:`kiln_verify.control.config`. A new family (HF exports, PEFT imports,
adapters) adds its module here, one :class:`Section` to :data:`SECTIONS` and one field to
:class:`~kiln_verify.control.config.ServerConfig`; sections are parsed in table order, so
the first refusal of an existing file stays the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kiln_verify.control.sections.model import parse_model
from kiln_verify.control.sections.openenv import parse_openenv
from kiln_verify.control.sections.policies import parse_policies

__all__ = ["SECTIONS", "Section"]


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    """A top-level table: its key, the ``ServerConfig`` field it fills and its parser."""

    key: str
    field: str
    parse: Callable[[Any, Mapping[str, str], str | None], Any]


SECTIONS: tuple[Section, ...] = (
    Section("openenv", "openenv", parse_openenv),
    Section("policies", "policies", parse_policies),
    Section("model", "model", parse_model),
)
