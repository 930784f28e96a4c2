"""Whether the server has a resident model, and the refusal when a request needs one.

Kept tiny and free of the HF half: the registry consults it before a ``kind=train``
request reaches its kind (a server without a model answers ``model_not_loaded``, not
``openenv_run_kind_unsupported``), and training admission calls
:func:`require_resident_model` the same way.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.sections.model import ModelSettings
from kiln_verify.errors import ApiModelNotLoaded

__all__ = ["MODEL_KINDS", "require_resident_model"]

MODEL_KINDS: Final = frozenset({"train"})
"""Run kinds that cannot run at all without a resident model."""


def require_resident_model(config: ServerConfig, what: str = "this request") -> ModelSettings:
    """The resident model's settings, or ``model_not_loaded`` naming what needed it."""
    if config.model is None:
        raise ApiModelNotLoaded(
            f"{what} needs a resident model, and this server was started without one "
            "(no --model, no [model] table)"
        )
    return config.model
