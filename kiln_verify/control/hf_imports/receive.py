"""Admit, receive, verify and install one import request (the engine the route calls).

The package docstring (:mod:`kiln_verify.control.hf_imports`) describes the steps; this
module only orders them and owns the request's staging directory.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.hf_imports.install import check_admission, install_archive
from kiln_verify.control.hf_imports.intake import (
    ARCHIVE_NAME,
    admit_name,
    check_headers,
    receive_body,
)
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.control.resident.store import adapters_root
from kiln_verify.errors import ApiHfImportFailed, KilnError
from kiln_verify.hf.importer import STAGING_PREFIX, ensure_registry
from kiln_verify.hf.manifest.http_imports import ImportPeftResponse

__all__ = ["receive_import"]


def _staging(config: ServerConfig, name: str) -> Path:
    """Admission that touches the disk (blocking): the registry, the target, a new staging."""
    try:
        root = ensure_registry(adapters_root(config))
    except KilnError as exc:
        raise ApiHfImportFailed(f"the adapter directory is unusable: {exc.rule}") from None
    check_admission(config, name)
    return Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))


async def receive_import(
    config: ServerConfig,
    name: str,
    *,
    content_type: Sequence[str],
    content_encoding: Sequence[str],
    content_length: Sequence[str],
    body: AsyncIterator[bytes],
) -> ImportPeftResponse:
    """Admit, receive, verify and install one import; the 201 answer's record."""
    admit_name(name)
    check_headers(content_type, content_encoding, content_length)
    require_resident_model(config, "POST /v1/train/hf/peft/imports/{name}")
    staging = await asyncio.to_thread(_staging, config, name)
    try:
        await receive_body(body, staging)
        return await asyncio.to_thread(
            install_archive, config, name, staging / ARCHIVE_NAME, staging
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
