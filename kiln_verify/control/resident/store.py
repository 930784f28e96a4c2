"""The adapter set in ``<state_dir>/adapters/``: listing it, and installing into it.

An adapter enters the set only through :func:`install_adapter`, which is the verified PEFT
import (:func:`kiln_verify.hf.importer.import_peft`, the checks of ``kiln-verify hf
import-peft``) against the resident model: the completed bundle verified in full, the
resident identity recomputed and compared with the export's, the PEFT configuration and
tensor shapes checked against the model, and the six installed files staged privately and
published with the core publisher's no-replace rename. A refusal leaves the directory as it
was: nothing partial, no staging left behind. An installed adapter is never replaced.

Listing verifies every directory again (:func:`kiln_verify.hf.importer.verify_installed`):
one changed or added by hand is listed ``invalid`` with the reason, and a run cannot use it
(:mod:`kiln_verify.control.resident.serving` checks the same way before loading).
"""

from __future__ import annotations

import datetime
import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.resident.barrier import adapter_barrier
from kiln_verify.control.resident.names import check_adapter_name
from kiln_verify.control.resident.records import (
    AdapterDiskEntry,
    AdapterRegistryStatus,
    AdaptersResponse,
)
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.core.digest import hash_file
from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import (
    ApiAdapterExists,
    ApiAdapterImportFailed,
    ApiAdapterRegistryFull,
    KilnError,
    TargetExists,
)
from kiln_verify.hf.digests import ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE
from kiln_verify.hf.importer import ImportOutcome, import_peft, verify_installed
from kiln_verify.limits import (
    MAX_ADAPTER_CONFIG_BYTES,
    MAX_ERROR_SNIPPET_CHARS,
    MAX_MODEL_FILE_BYTES,
    MAX_SERVER_ADAPTERS,
)

__all__ = ["ADAPTERS_DIR", "adapters_root", "install_adapter", "list_adapters", "listed_names"]

ADAPTERS_DIR: Final = "adapters"


def adapters_root(config: ServerConfig) -> Path:
    """``<state_dir>/adapters``: where this server's adapters live."""
    return config.state_dir / ADAPTERS_DIR


def listed_names(root: Path) -> list[str]:
    """The directory names a listing shows, by name, at most ``MAX_SERVER_ADAPTERS``:
    printable ASCII, no leading dot (staging), no ``..``, no symlink."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    names = []
    for entry in entries:
        name = entry.name
        if (
            name.startswith(".")
            or ".." in name
            or not (name.isascii() and name.isprintable())
            or not entry.is_dir(follow_symlinks=False)
        ):
            continue
        names.append(name)
    return sorted(names)[:MAX_SERVER_ADAPTERS]


def _when(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _lora_config(directory: Path) -> dict[str, Any]:
    """``adapter_config.json`` as a strict JSON object, or ``{}`` when unreadable."""
    try:
        data = (directory / ADAPTER_CONFIG_FILE).open("rb").read(MAX_ADAPTER_CONFIG_BYTES + 1)
        return loads_object(data, max_bytes=MAX_ADAPTER_CONFIG_BYTES)
    except (OSError, KilnError):
        return {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _entry(
    root: Path, name: str, loaded: Collection[str], errors: Mapping[str, str]
) -> AdapterDiskEntry:
    directory = root / name
    files: dict[str, int] = {}
    for item in os.scandir(directory):
        info = item.stat(follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            files[item.name] = info.st_size
    error: str | None = None
    try:
        check_adapter_name(name)
        verify_installed(directory, name=name)
    except KilnError as exc:
        error = f"{exc.code}: {exc.rule}"[: 4 * MAX_ERROR_SNIPPET_CHARS]
    weights_sha, weights_size = None, None
    if error is None:
        digest = hash_file(directory / ADAPTER_WEIGHTS_FILE, max_bytes=MAX_MODEL_FILE_BYTES)
        weights_sha, weights_size = str(digest.sha256).removeprefix("sha256:"), digest.size_bytes
    config = _lora_config(directory)
    rank = config.get("r")
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
    alpha = _number(config.get("lora_alpha"))
    targets = config.get("target_modules")
    if isinstance(targets, str):
        targets = [targets]
    base = config.get("base_model_name_or_path")
    status: AdapterRegistryStatus = (
        "invalid" if error is not None else "loaded" if name in loaded else "available"
    )
    return AdapterDiskEntry(
        name=name,
        has_config=ADAPTER_CONFIG_FILE in files,
        has_weights=ADAPTER_WEIGHTS_FILE in files,
        size_bytes=sum(files.values()),
        modified_at=_when(directory.stat().st_mtime),
        files=sorted(files),
        path=str(directory),
        status=status,
        adapter_model_sha256=weights_sha,
        adapter_model_size_bytes=weights_size,
        rank=rank,
        alpha=alpha,
        alpha_over_rank=alpha / rank if alpha is not None and rank else None,
        target_modules=sorted(t for t in targets if isinstance(t, str))
        if isinstance(targets, list)
        else [],
        base_model_name_or_path=base if isinstance(base, str) and base else None,
        last_load_error=errors.get(name),
        error=error,
    )


def list_adapters(
    config: ServerConfig,
    *,
    loaded: Collection[str] = (),
    load_errors: Mapping[str, str] | None = None,
) -> AdaptersResponse:
    """``GET /v1/adapters`` (blocking: it verifies every directory); ``loaded``: the
    adapters the resident model holds now, ``load_errors`` the last failure of each."""
    require_resident_model(config, "listing adapters")
    root = adapters_root(config)
    errors = load_errors or {}
    entries = [_entry(root, name, loaded, errors) for name in listed_names(root)]
    return AdaptersResponse(
        loaded_adapters=sorted(loaded),
        adapter_dir=str(root),
        available=entries,
        available_adapters=entries,
    )


def install_adapter(
    config: ServerConfig, *, bundle: str | os.PathLike[str], name: str
) -> ImportOutcome:
    """Install the adapter of a completed HF/TRL bundle (an export after its ``train.py``)
    as ``name``, through the verified PEFT import against the resident model; returns the
    import's :class:`~kiln_verify.hf.importer.ImportOutcome`.

    Typed refusals, each leaving ``<state_dir>/adapters/`` as it was: ``model_not_loaded``,
    ``adapter_name_invalid``, ``adapter_exists``, ``adapter_registry_full`` and
    ``adapter_import_failed`` (its ``cause``: the import's own error code)."""
    model = require_resident_model(config, "installing an adapter")
    check_adapter_name(name)
    root = adapters_root(config)
    if os.path.lexists(root / name):
        raise ApiAdapterExists(f"adapter {name!r} is already installed")
    if len(listed_names(root)) >= MAX_SERVER_ADAPTERS:
        raise ApiAdapterRegistryFull(
            f"the server already holds MAX_SERVER_ADAPTERS = {MAX_SERVER_ADAPTERS} adapters"
        )
    try:
        with adapter_barrier(root):  # one publisher at a time (the HTTP import shares it)
            outcome = import_peft(
                bundle=bundle,
                name=name,
                model=model.path,
                registry=root,
                served_model_id=model.served_model_id,
            )
    except TargetExists:
        raise ApiAdapterExists(f"adapter {name!r} is already installed") from None
    except KilnError as exc:
        refusal = ApiAdapterImportFailed(
            f"adapter {name!r} failed the verified import ({exc.code}: "
            f"{exc.rule[: 4 * MAX_ERROR_SNIPPET_CHARS]})",
            hint=exc.hint,
        )
        refusal.cause = exc.code
        raise refusal from None
    return outcome
