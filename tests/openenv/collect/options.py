"""A test shorthand for collection controls: option and control fields in one list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kiln_verify.openenv.collect import CollectionControls, CollectionOptions
from kiln_verify.openenv.collect.controls import OPTION_NAMES


def make_controls(
    environments: Sequence[str],
    *,
    reset_templates: Sequence[Mapping[str, Any]] | None = None,
    credential_envs: Sequence[str | None] = (),
    **settings: Any,
) -> CollectionControls:
    """``CollectionControls.create`` with the :class:`CollectionOptions` fields among
    ``settings`` gathered into its ``options`` (tests list both kinds together)."""
    options = {name: value for name, value in settings.items() if name in OPTION_NAMES}
    rest = {name: value for name, value in settings.items() if name not in OPTION_NAMES}
    return CollectionControls.create(
        environments,
        reset_templates=reset_templates,
        credential_envs=credential_envs,
        options=CollectionOptions(**options),
        **rest,
    )
