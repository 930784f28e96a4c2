"""The registry as the routes see it: one lock, every blocking step in a worker thread.

Creation, detail, download and deletion hold one ``asyncio.Lock`` per server (Kiln's
dedicated export lock; detail takes it too, so a deletion never reads as damage), and a
download holds it until its last byte is sent: a deletion that arrives mid-download waits,
and can never remove an archive while it streams. Listing reads only self-verifying
manifests and takes no lock, so ``hf list`` never waits behind a long download. Hashing,
the writers and the archive compression all run off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.hf_exports.create import create_grpo, create_sft
from kiln_verify.control.hf_exports.registry import (
    delete_export,
    export_detail,
    list_exports,
    verified_export,
)
from kiln_verify.control.hf_exports.store import registry_root
from kiln_verify.control.hf_exports.stream import archive_chunks
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.hf.manifest.http_exports import (
    ExportDetail,
    ExportList,
    ExportSummary,
    GrpoExportRequest,
    SftExportRequest,
)

__all__ = ["Download", "ExportService"]

Download = tuple[ExportSummary, AsyncIterator[bytes]]
"""The verified export's summary and its archive's chunks."""


class ExportService:
    """The export registry of one server (``<state_dir>/hf-exports``)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.lock = asyncio.Lock()

    def _require(self, what: str) -> None:
        require_resident_model(self.config, what)

    async def create_sft(self, request: SftExportRequest) -> ExportSummary:
        self._require("POST /v1/train/hf/sft/exports")
        async with self.lock:
            return await asyncio.to_thread(
                lambda: create_sft(self.config, registry_root(self.config), request)
            )

    async def create_grpo(self, request: GrpoExportRequest) -> ExportSummary:
        self._require("POST /v1/train/hf/grpo/exports")
        async with self.lock:
            return await asyncio.to_thread(
                lambda: create_grpo(self.config, registry_root(self.config), request)
            )

    async def list(self) -> ExportList:
        self._require("GET /v1/train/hf/exports")
        return await asyncio.to_thread(lambda: list_exports(registry_root(self.config)))

    async def detail(self, name: str) -> ExportDetail:
        self._require("GET /v1/train/hf/exports/{name}")
        async with self.lock:
            return await asyncio.to_thread(lambda: export_detail(registry_root(self.config), name))

    async def delete(self, name: str, expected: str | None) -> None:
        self._require("DELETE /v1/train/hf/exports/{name}")
        async with self.lock:
            await asyncio.to_thread(
                lambda: delete_export(registry_root(self.config), name, expected)
            )

    @asynccontextmanager
    async def download(
        self, name: str
    ) -> AsyncIterator[tuple[ExportSummary, AsyncIterator[bytes]]]:
        """The verified export's summary and its archive chunks, the lock held throughout."""
        self._require("GET /v1/train/hf/exports/{name}/download")
        async with self.lock:
            directory, summary = await asyncio.to_thread(
                lambda: verified_export(registry_root(self.config), name)
            )
            chunks = archive_chunks(directory, f"{name}.kiln-hf")
            try:
                yield summary, chunks
            finally:
                await chunks.aclose()  # type: ignore[attr-defined]
