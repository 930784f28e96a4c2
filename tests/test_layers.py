"""The layer contract covers the whole library: every module of ``kiln_verify`` sits in a layer.

import-linter (``lint-imports``, run by scripts/check.sh) checks the imports between the
layers listed in ``pyproject.toml``; a module listed in no layer would escape that check
silently, so a new package must be placed in a layer before it lands. The same holds
inside the protocol package (``protocol-inside``) and for the server's route families
(``route-families-apart``): a new protocol module or route family must be named there.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _contract(contract_id: str) -> dict[str, object]:
    return next(c for c in _contracts() if c["id"] == contract_id)


def _layer_modules(contract_id: str = "layers") -> list[str]:
    layers = _contract(contract_id)["layers"]
    assert isinstance(layers, list)
    names: list[str] = []
    for layer in layers:
        names += [part.strip() for part in str(layer).replace("|", ":").split(":")]
    return names


def _children(package: str) -> set[str]:
    """The modules directly inside ``package`` (its ``__init__`` aside), by short name."""
    folder = ROOT.joinpath(*package.split("."))
    return {
        path.stem if path.is_file() else path.name
        for path in folder.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }


def _imports_nothing(module: str) -> bool:
    """A package whose ``__init__`` only documents its modules (no import at all)."""
    path = ROOT.joinpath(*module.split("."), "__init__.py")
    if not path.is_file():
        return False
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return not any(isinstance(node, ast.Import | ast.ImportFrom) for node in ast.walk(tree))


def _library_modules() -> list[str]:
    modules = []
    for path in sorted((ROOT / "kiln_verify").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules.append(".".join(parts))
    return modules


def test_every_library_module_is_in_a_layer() -> None:
    layers = _layer_modules()
    assert len(layers) == len(set(layers)), "a module is listed in two layers"
    outside = [
        module
        for module in _library_modules()
        if module != "kiln_verify"  # the public surface, above every layer
        and not _imports_nothing(module)  # a container such as kiln_verify.openenv
        and not any(module == layer or module.startswith(layer + ".") for layer in layers)
    ]
    assert outside == [], f"place these modules in a layer of pyproject.toml: {outside}"


def test_every_layer_names_an_existing_module() -> None:
    modules = set(_library_modules()) | {"pytest_kiln"}
    missing = [layer for layer in _layer_modules() if layer not in modules]
    assert missing == []


def test_every_protocol_module_is_in_a_protocol_layer() -> None:
    layers = _layer_modules("protocol-inside")
    assert sorted(layers) == sorted(_children("kiln_verify.openenv.protocol"))


def test_every_route_family_is_kept_apart() -> None:
    modules = _contract("route-families-apart")["modules"]
    assert isinstance(modules, list)
    families = {str(name).rpartition(".")[2] for name in modules}
    assert families == _children("kiln_verify.server.routes") - {"common"}
