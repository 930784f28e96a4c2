"""Which policy plays a run's ``adapter``, and the one resident model of each server.

With a resident model, ``base`` and every installed adapter are played by the
``transformers`` policy over that model (:class:`~kiln_verify.control.resident.model.
ResidentModel`), ahead of any ``[policies.<adapter>]`` table of the same name; other names
keep their policy tables, so a server may still offer ``openai`` or ``scripted`` adapters
beside its own. Without one, nothing changes: every adapter is its policy table.

One :class:`ResidentModel` exists per model directory, device, served id and adapter
directory in this process, created on first use (never at start-up) and shared by every
run, route and application that names the same ones.
"""

from __future__ import annotations

import asyncio
import threading

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.request import BASE_ADAPTER
from kiln_verify.control.resident.model import ResidentModel
from kiln_verify.control.resident.names import is_adapter_name
from kiln_verify.control.resident.records import AdaptersResponse
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.control.resident.store import adapters_root, list_adapters
from kiln_verify.control.sections.model import ModelSettings
from kiln_verify.openenv.policy.base import Policy

__all__ = ["adapter_listing", "peek_resident", "resident_for", "served_policy", "serves"]

_RESIDENTS: dict[tuple[ModelSettings, str], ResidentModel] = {}
_GUARD = threading.Lock()


def _key(config: ServerConfig) -> tuple[ModelSettings, str]:
    return require_resident_model(config), str(adapters_root(config))


def resident_for(config: ServerConfig) -> ResidentModel:
    """The server's resident model (created, not loaded, on first use)."""
    key = _key(config)
    with _GUARD:
        resident = _RESIDENTS.get(key)
        if resident is None:
            resident = _RESIDENTS[key] = ResidentModel(key[0], key[1])
        return resident


def peek_resident(config: ServerConfig) -> ResidentModel | None:
    """The resident model if one was created already (listing never creates one)."""
    if config.model is None:
        return None
    with _GUARD:
        return _RESIDENTS.get(_key(config))


def serves(config: ServerConfig, adapter: str) -> bool:
    """Whether the resident model plays ``adapter``: ``base``, or an installed adapter."""
    if config.model is None:
        return False
    if adapter == BASE_ADAPTER:
        return True
    return is_adapter_name(adapter) and (adapters_root(config) / adapter).is_dir()


async def served_policy(config: ServerConfig, adapter: str) -> Policy | None:
    """The resident model's policy for ``adapter`` (loaded in a worker thread, so the event
    loop keeps answering), or ``None`` when the resident model does not play it."""
    if not serves(config, adapter):
        return None
    resident = resident_for(config)
    return await asyncio.to_thread(resident.policy, adapter, base_name=BASE_ADAPTER)


def adapter_listing(config: ServerConfig) -> AdaptersResponse:
    """``GET /v1/adapters`` (blocking): the adapter directory, verified, with what the
    resident model holds now (``model_not_loaded`` without a resident model)."""
    require_resident_model(config, "listing adapters")
    resident = peek_resident(config)
    if resident is None:
        return list_adapters(config)
    return list_adapters(
        config, loaded=resident.loaded_adapters, load_errors=dict(resident.load_errors)
    )
