"""The supported Python API: ``kiln_verify.__all__`` (httpx's exported-members test is the model).

Every exported name resolves, is the object its module defines, is public and documented
(a docstring, and a row of docs/python-api.md); the lazy table, the type checker's imports
and ``__all__`` name the same things; and ``import kiln_verify`` loads none of them.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import kiln_verify

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "python-api.md"


def test_all_is_unique_and_public() -> None:
    names = kiln_verify.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert name == "__version__" or not name.startswith("_"), name


def test_every_exported_name_resolves_to_its_module_object() -> None:
    lazy = kiln_verify._LAZY
    assert set(kiln_verify.__all__) == {*lazy, *kiln_verify._ALIASES, "__version__"}
    for name, module in lazy.items():
        value = getattr(kiln_verify, name)
        assert value is getattr(import_module(module), name), name
        assert name in dir(kiln_verify)


def test_exported_classes_and_functions_are_public_and_documented() -> None:
    for name in kiln_verify.__all__:
        value = getattr(kiln_verify, name)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        module = value.__module__
        assert module.startswith("kiln_verify."), (name, module)
        assert not any(part.startswith("_") for part in module.split(".")), (name, module)
        # an old spelling is its new name's object (checked below, with the aliases)
        assert value.__name__ == kiln_verify._ALIASES.get(name, name), (name, value.__name__)
        assert inspect.getdoc(value), f"{name} has no docstring"


def test_the_type_checkers_imports_match_the_lazy_table() -> None:
    tree = ast.parse((ROOT / "kiln_verify" / "__init__.py").read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )
    imported: dict[str, str] = {}
    for node in ast.walk(block):
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "typing":
            for alias in node.names:
                imported[alias.asname or alias.name] = node.module
    assert imported == kiln_verify._LAZY


def test_docs_list_every_exported_name_and_nothing_else() -> None:
    text = DOC.read_text(encoding="utf-8")
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`([A-Za-z_]+)`", row)}
    assert listed | {"__version__"} == set(kiln_verify.__all__)
    assert "`__version__`" in text
    assert "`docs/python-api.md`" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_importing_the_package_loads_none_of_the_exports() -> None:
    probe = (
        "import json, sys; import kiln_verify; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kiln_verify', 'pydantic', 'httpx', 'websockets', 'typer', 'typing'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == ["kiln_verify", "kiln_verify._version"]


def test_renamed_exports_keep_their_old_spelling_as_the_same_object() -> None:
    aliases = kiln_verify._ALIASES
    assert aliases == {"verify_path": "verify_hf_path", "BundleReport": "HfBundleReport"}
    text = DOC.read_text(encoding="utf-8")
    for old, new in aliases.items():
        assert old in kiln_verify.__all__, old  # star imports keep giving it
        assert new in kiln_verify.__all__, new
        assert getattr(kiln_verify, old) is getattr(kiln_verify, new), old
        assert old in dir(kiln_verify)
        assert f"`{old}` is `{new}`" in text, old
    namespace: dict[str, object] = {}
    exec("from kiln_verify import BundleReport, verify_path", namespace)
    assert namespace["verify_path"] is kiln_verify.verify_hf_path
    assert namespace["BundleReport"] is kiln_verify.HfBundleReport


def test_one_name_one_meaning() -> None:
    """The OpenEnv and HF/TRL verifiers, live replay and token re-rendering, the collector's
    and the test builder's bundles: each pair under two names."""
    from kiln_verify.hf import verify as hf_verify
    from kiln_verify.openenv import verify as openenv_verify
    from kiln_verify.testing import bundles as fixture_bundles

    assert not hasattr(hf_verify, "verify_bundle")
    assert not hasattr(hf_verify, "verify_path")
    assert kiln_verify.verify_bundle is openenv_verify.verify_bundle
    assert not hasattr(fixture_bundles, "Bundle")
    assert not hasattr(fixture_bundles, "build_bundle")
    assert fixture_bundles.FixtureBundle.__name__ != kiln_verify.Bundle.__name__
    assert import_module("kiln_verify.hf.rerender").TokenRerender
    for gone in ("kiln_verify.hf.replay", "kiln_verify.tokens.replay"):
        assert not (ROOT / (gone.replace(".", "/") + ".py")).exists(), gone


def test_trl_entry_points_are_listed_and_documented() -> None:
    """``kiln_verify.trl.__all__`` names its entry points, importing ``kiln_verify.trl``
    imports neither TRL nor torch, each resolves to its module's class, and
    docs/python-api.md lists each."""
    import kiln_verify.trl as trl

    names = trl.__all__
    expected = {"BatchRecorder", "OpenEnvEnvironment", "OpenEnvRolloutFunc", "OpenEnvToolFactory"}
    assert set(names) == set(trl._WHERE) == expected
    text = DOC.read_text(encoding="utf-8").split("\n## TRL\n", 1)[1]
    for name in names:
        assert f"`{name}`" in text, name
        assert name in dir(trl)
        value = getattr(trl, name)
        assert value is getattr(import_module(trl._WHERE[name]), name), name
        assert inspect.isclass(value), name
        assert value.__name__ == name, name
        assert inspect.getdoc(value), f"{name} has no docstring"
    probe = (
        "import json, sys; import kiln_verify.trl; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('trl', 'torch', 'transformers', 'httpx'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
