"""Package modules that resolve their public names on first access (PEP 562).

A package that re-exports from heavy modules (the collector, the TRL integration) would
otherwise import all of them, and the network and ML libraries behind them, as soon as
anything below it is imported. :func:`lazy_exports` gives such a package the module
``__getattr__`` and ``__dir__`` that import a name's module only when the name is used.
(``kiln_verify/__init__.py`` keeps its own copy: importing it may load nothing else,
not even this module.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``where`` maps each name to its module.

    A resolved name is stored in the package's namespace, so later lookups are plain
    attribute reads.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
