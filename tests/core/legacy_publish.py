"""The two multi-target publishers that kiln_verify.core.publisher replaced, exactly as
they were at commit 909997b, to write real leftovers for the recovery tests.

``data/publish_909997b/`` holds verbatim copies (``git show 909997b:PATH``) of
``kiln_verify/openenv/collect/publish.py`` (``together.py.txt``),
``kiln_verify/openenv/collect/journal.py`` (``journal.py.txt``) and
``kiln_verify/core/publish_group.py`` (``group.py.txt``); the ``.txt`` keeps them out of
linting and collection. :func:`load` executes them as modules; the one line that named
the journal's old module is pointed at the loaded copy. Everything else they import
(``kiln_verify.core.rename``, the JSON codec, the errors) is unchanged since 909997b.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

COMMIT = "909997b"
DATA = Path(__file__).parent / "data" / f"publish_{COMMIT}"
ROOT = Path(__file__).parents[2]


def _module(name: str, file: str, replace: tuple[str, str] | None = None) -> types.ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    path = DATA / file
    source = path.read_text()
    if replace is not None:
        assert replace[0] in source, replace
        source = source.replace(*replace)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # before running it: dataclasses look their module up
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def load() -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """``(together, journal, group)``: the old ``collect.publish``, ``collect.journal``
    and ``core.publish_group``."""
    journal = _module(f"kiln_legacy_{COMMIT}_journal", "journal.py.txt")
    together = _module(
        f"kiln_legacy_{COMMIT}_together",
        "together.py.txt",
        (
            "from kiln_verify.openenv.collect import journal",
            f"import kiln_legacy_{COMMIT}_journal as journal",
        ),
    )
    group = _module(f"kiln_legacy_{COMMIT}_group", "group.py.txt")
    return together, journal, group


PRELUDE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from tests.core.legacy_publish import load
together, legacy_journal, group = load()
"""
"""For crashkit children: ``sys.argv[1]`` is the repository root (:data:`ROOT`)."""
