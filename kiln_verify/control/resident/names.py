"""The adapter name rule: Kiln's ``ImportAdapterName``, plus the names a request reserves.

A name is 1..``MAX_ADAPTER_NAME_CHARS`` ASCII characters, a letter or digit first, then
letters, digits, ``.``, ``_`` or ``-``, with no ``..`` (the verified import's own rule,
:func:`kiln_verify.hf.envelope.check_import_name`, applied first). ``base`` names the
resident model itself in a run request, and ``none``/``null`` read as "no adapter" to
people and other tools, so none of them (in any case) can name an installed adapter. Such a
name is a directory name under ``<state_dir>/adapters/`` and never anything else: no
separator, no leading dot, no way out of that directory.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.control.request import BASE_ADAPTER
from kiln_verify.errors import ApiAdapterNameInvalid, KilnError, snippet
from kiln_verify.hf.envelope import check_import_name
from kiln_verify.limits import MAX_ADAPTER_NAME_CHARS

__all__ = ["RESERVED_NAMES", "check_adapter_name", "is_adapter_name"]

RESERVED_NAMES: Final = frozenset({BASE_ADAPTER, "none", "null"})


def check_adapter_name(name: object) -> str:
    """``name`` if it may name an installed adapter, else ``adapter_name_invalid``."""
    if not isinstance(name, str):
        raise ApiAdapterNameInvalid("an adapter name must be a string")
    shown = snippet(name)
    if len(name) > MAX_ADAPTER_NAME_CHARS:
        raise ApiAdapterNameInvalid(
            f"the adapter name {shown} is longer than MAX_ADAPTER_NAME_CHARS = "
            f"{MAX_ADAPTER_NAME_CHARS}"
        )
    try:
        check_import_name(name)
    except KilnError:
        raise ApiAdapterNameInvalid(f"{shown} is not a valid adapter name") from None
    if name.lower() in RESERVED_NAMES:
        raise ApiAdapterNameInvalid(f"{shown} is reserved and cannot name an installed adapter")
    return name


def is_adapter_name(name: object) -> bool:
    try:
        check_adapter_name(name)
    except ApiAdapterNameInvalid:
        return False
    return True
