"""The package version, in a module of its own so that any layer can read it.

``kiln_verify/__init__.py`` is the public surface and (lazily) reaches every engine;
a record or a CLI module that imported the version from there would depend on the top of
the tree. Both ``kiln_verify.__version__`` and the export and CLI read this one constant.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
