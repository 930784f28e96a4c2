"""The registry directory ``<state_dir>/hf-exports/``: its shape, its leftovers, its entries.

Blocking; called from worker threads with the registry lock held
(:mod:`kiln_verify.control.hf_exports.service`). The directory is private (0700) and may
hold exactly three kinds of entry, each a real directory:

- ``NAME.kiln-hf``: a published export (``NAME`` Kiln's ``ExportName``);
- ``.staging-NAME-<hex>``: a creation in progress, or one a crash left behind;
- ``.deleting-NAME-<hex>``: a deletion in progress, or one a crash left behind.

Leftovers of the last two kinds are removed when the next export is created. Anything
else (a symbolic link, a special file, a file, a foreign name) fails every scan closed:
the server never guesses what someone else put into its registry.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import Final

from kiln_verify.control.config import ServerConfig
from kiln_verify.core.publish import fsync_dir
from kiln_verify.errors import ApiHfTrlExportFailed, ApiHfTrlExportNotFound, snippet
from kiln_verify.hf.manifest.http_exports import EXPORT_NAME

__all__ = [
    "BUNDLE_SUFFIX",
    "DELETING_PREFIX",
    "REGISTRY_DIR",
    "STAGING_PREFIX",
    "RegistryScan",
    "bundle_dir",
    "fresh_path",
    "new_private_dir",
    "registry_root",
    "remove_leftovers",
    "remove_tree",
    "scan",
    "target",
]

REGISTRY_DIR: Final = "hf-exports"
BUNDLE_SUFFIX: Final = ".kiln-hf"
STAGING_PREFIX: Final = ".staging-"
DELETING_PREFIX: Final = ".deleting-"


def registry_root(config: ServerConfig) -> Path:
    """``<state_dir>/hf-exports``, created private if missing, checked every time."""
    root = config.state_dir / REGISTRY_DIR
    try:
        config.state_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(root, 0o700)
        info = os.lstat(root)
        if not stat.S_ISDIR(info.st_mode):
            raise ApiHfTrlExportFailed(
                f"the export registry {snippet(str(root))} is not a real directory"
            )
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(root, 0o700, follow_symlinks=False)
    except OSError as exc:
        raise ApiHfTrlExportFailed(f"the export registry is unusable: {exc.strerror}") from None
    return root


def bundle_dir(root: Path, name: str) -> Path:
    return root / f"{name}{BUNDLE_SUFFIX}"


class RegistryScan:
    """The registry's published export names (sorted) and its crash-left entries."""

    def __init__(self, published: list[str], leftovers: list[str]) -> None:
        self.published = published
        self.leftovers = leftovers


def _leftover(name: str) -> bool:
    for prefix in (STAGING_PREFIX, DELETING_PREFIX):
        if name.startswith(prefix):
            stem, _, token = name[len(prefix) :].rpartition("-")
            return bool(EXPORT_NAME.fullmatch(stem)) and len(token) == 32
    return False


def scan(root: Path) -> RegistryScan:
    """Every entry classified; an unexpected one fails closed (``hf_trl_export_failed``)."""
    published: list[str] = []
    leftovers: list[str] = []
    try:
        names = sorted(os.listdir(root))
        for name in names:
            info = os.lstat(root / name)
            real_dir = stat.S_ISDIR(info.st_mode)
            stem = name[: -len(BUNDLE_SUFFIX)] if name.endswith(BUNDLE_SUFFIX) else ""
            if real_dir and EXPORT_NAME.fullmatch(stem):
                published.append(stem)
            elif real_dir and _leftover(name):
                leftovers.append(name)
            else:
                kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "an unexpected entry"
                raise ApiHfTrlExportFailed(
                    f"the export registry holds {kind} {snippet(name)}; refusing to guess",
                    hint=f"remove it from {root} by hand; the registry holds only exports",
                )
    except OSError as exc:
        raise ApiHfTrlExportFailed(f"cannot read the export registry: {exc.strerror}") from None
    return RegistryScan(published, leftovers)


def target(root: Path, name: str) -> Path:
    """The published directory of ``name``: a real directory, else not found or failed."""
    path = bundle_dir(root, name)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ApiHfTrlExportNotFound(f"no export is named {snippet(name)}") from None
    except OSError as exc:
        raise ApiHfTrlExportFailed(f"cannot read export {name}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ApiHfTrlExportFailed(
            f"the registry entry of {name} is not a real directory; refusing to touch it",
            hint=f"remove {path} by hand",
        )
    return path


def fresh_path(root: Path, prefix: str, name: str) -> Path:
    """``root/<prefix>NAME-<32 hex>``: a name nothing else uses (128 random bits)."""
    return root / f"{prefix}{name}-{uuid.uuid4().hex}"


def new_private_dir(root: Path, prefix: str, name: str) -> Path:
    path = fresh_path(root, prefix, name)
    os.mkdir(path, 0o700)
    return path


def remove_tree(root: Path, name: str) -> None:
    """Remove ``root/name`` (links inside are unlinked, never followed), then sync ``root``."""
    shutil.rmtree(root / name)
    fsync_dir(root)


def remove_leftovers(root: Path, found: RegistryScan) -> None:
    """Crash-left staging and deletion directories: never an export, safe to remove."""
    try:
        for name in found.leftovers:
            remove_tree(root, name)
    except OSError as exc:
        raise ApiHfTrlExportFailed(
            f"cannot remove a crash-left registry entry: {exc.strerror}"
        ) from None
    found.leftovers = []
