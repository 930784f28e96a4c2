"""Kiln's ``AdaptersResponse`` (``GET /v1/adapters``) and its parts, field for field.

From ``contracts/kiln-artifacts-v1.schema.json`` (ericflo/kiln @40b8a45e): every key Kiln's
closed records require is written, ``null`` where this server has nothing to say. What
this server fills and what it leaves empty (docs/resident-model.md):

- ``active_adapter``, ``active``, ``loaded_adapter``, ``loaded_adapter_identity``: ``null``.
  A Kiln server has one live adapter that every request uses; here each run names its own
  (``adapter`` of the run request), so there is no single active one.
- ``loaded_adapters``: the adapters whose weights the resident model holds now (attached on
  a run's first use), sorted.
- ``available`` and ``available_adapters`` (the same list, as Kiln writes it): one
  :class:`AdapterDiskEntry` per directory under ``adapter_dir``, by name, ``status``
  ``loaded``, ``available`` or ``invalid`` (the directory failed the installed-adapter
  verification; ``error`` says why). Canary checks, parent metadata and Kiln's own
  ``adapter_manifest`` are not produced by this server: ``canary_status`` is ``unknown``
  and the rest ``null`` or empty.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictStr

from kiln_verify.records import F64, U64, FreeJson, Record

__all__ = [
    "AdapterCanaryCheckReceipt",
    "AdapterDiskEntry",
    "AdapterRegistryStatus",
    "AdaptersResponse",
    "LoadedAdapterIdentity",
]

NonEmpty = Annotated[StrictStr, Field(min_length=1)]
RawSha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
AdapterRegistryStatus = Literal["loaded", "available", "quarantined", "invalid"]


class LoadedAdapterIdentity(Record):
    name: NonEmpty
    content_revision: RawSha256


class AdapterCanaryCheckReceipt(Record):
    _omit_when_none = frozenset({"failure_reason"})

    name: NonEmpty
    passed: StrictBool
    failure_reason: NonEmpty | None = None


class AdapterDiskEntry(Record):
    """One adapter directory, valid or not (Kiln's ``AdapterDiskEntry``)."""

    name: NonEmpty
    has_config: StrictBool
    has_weights: StrictBool
    size_bytes: U64
    modified_at: StrictStr | None
    files: list[StrictStr]
    path: NonEmpty | None
    status: AdapterRegistryStatus
    adapter_model_sha256: RawSha256 | None
    adapter_model_size_bytes: U64 | None
    rank: U64 | None
    alpha: F64 | None
    alpha_over_rank: F64 | None
    target_modules: list[StrictStr]
    base_model_name_or_path: NonEmpty | None
    parent_adapter_metadata: FreeJson | None = None
    canary_status: Literal["unknown", "passed", "quarantined"] = "unknown"
    canary_failure_reason: NonEmpty | None = None
    canary_warnings: list[StrictStr] = Field(default_factory=list)
    canary_checks: list[AdapterCanaryCheckReceipt] = Field(default_factory=list)
    canary_status_path: NonEmpty | None = None
    adapter_manifest: FreeJson | None = None
    adapter_manifest_path: NonEmpty | None = None
    adapter_manifest_error: NonEmpty | None = None
    last_load_error: NonEmpty | None = None
    error: NonEmpty | None = None


class AdaptersResponse(Record):
    """``GET /v1/adapters``: the resident and on-disk adapter view (Kiln's record)."""

    active_adapter: NonEmpty | None = None
    active: NonEmpty | None = None
    loaded_adapter: NonEmpty | None = None
    loaded_adapter_identity: LoadedAdapterIdentity | None = None
    loaded_adapters: list[NonEmpty]
    adapter_dir: NonEmpty
    available: list[AdapterDiskEntry]
    available_adapters: list[AdapterDiskEntry]
