"""The embedded reference runner: ``train.py`` and ``requirements.lock`` as exported bytes.

Both files are package data; every export bundle embeds them byte for byte, and their
SHA-256 identities are what the export manifest's ``reference_script`` and
``environment_lock`` record. ``train.py`` is standalone (standard library at module level)
and is never imported by kiln-verify itself.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

SCRIPT_NAME = "train.py"
LOCK_NAME = "requirements.lock"


@dataclass(frozen=True)
class EmbeddedFile:
    """One embedded runner file: its bundle name, exact bytes and ``sha256:<hex>`` digest."""

    name: str
    data: bytes
    sha256: str

    @property
    def size_bytes(self) -> int:
        return len(self.data)


def _load(name: str) -> EmbeddedFile:
    data = resources.files(__name__).joinpath(name).read_bytes()
    return EmbeddedFile(name, data, "sha256:" + hashlib.sha256(data).hexdigest())


@cache
def reference_script() -> EmbeddedFile:
    """The exact bytes of the reference runner exported as ``train.py``."""
    return _load(SCRIPT_NAME)


@cache
def environment_lock() -> EmbeddedFile:
    """The exact bytes of the environment lock exported as ``requirements.lock``."""
    return _load(LOCK_NAME)
