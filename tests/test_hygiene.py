"""Production code stays implementation-neutral (contract §14.1 hygiene).

1. Nothing under ``kiln_verify/`` names the oracle implementation the interop gate may run
   against (``miniopenenv``, any case) or reads the gate's variables
   (``KILN_OPENENV_INTEROP_*``, ``OPENENV_INTEROP_ROOT``): those belong to
   ``scripts/check_miniopenenv_interop.sh`` and the tests only.
2. ``kiln_verify/`` imports this project's ``oracle`` package only where a user asks for it:
   - ``cli/oracle_cmd.py`` is the ``kiln-verify oracle`` front end (list/serve), whose whole
     job is to run the oracle;
   - ``cli/embedded_oracle.py`` starts embedded oracle servers in-process: the default
     environment of ``openenv rollout`` and ``openenv evaluate`` when no ``--environment`` is
     given (through ``cli/collection_options.py``, which no longer imports the oracle
     itself), and the servers ``openenv replay --oracle [NAME]`` replays against (matched to
     the bundle's captured identities). It imports the oracle lazily inside functions, so
     neither collection nor replay depends on the oracle unless a user asks for it.
   The client, collector, verifier, replay and evaluation packages never import it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "kiln_verify"

FORBIDDEN = re.compile(r"miniopenenv|KILN_OPENENV_INTEROP_|OPENENV_INTEROP_ROOT", re.IGNORECASE)

#: module (relative to kiln_verify/) -> whether its oracle imports must be lazy (in a function)
ORACLE_IMPORTS_ALLOWED: dict[str, bool] = {
    "cli/oracle_cmd.py": False,
    "cli/embedded_oracle.py": True,
}


def _production_files() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


def test_production_code_never_names_the_oracle_implementation() -> None:
    offenders: list[str] = []
    for path in _production_files():
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert offenders == [], "production code must stay implementation-neutral:\n" + "\n".join(
        offenders
    )


def _oracle_imports(tree: ast.AST) -> list[tuple[int, bool]]:
    """``(line, lazy)`` for every import of the ``oracle`` package in a module."""
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                if any(alias.name.split(".")[0] == "oracle" for alias in child.names):
                    found.append((child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                if child.level == 0 and (child.module or "").split(".")[0] == "oracle":
                    found.append((child.lineno, in_function))
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute | ast.Name)
                and (getattr(child.func, "attr", None) or getattr(child.func, "id", None))
                in ("import_module", "__import__")
                and child.args
                and isinstance(child.args[0], ast.Constant)
                and str(child.args[0].value).split(".")[0] == "oracle"
            ):
                found.append((child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def test_only_the_oracle_front_ends_import_the_oracle_package() -> None:
    unexpected: list[str] = []
    eager: list[str] = []
    for path in _production_files():
        if path.suffix != ".py":
            continue
        relative = path.relative_to(PACKAGE).as_posix()
        imports = _oracle_imports(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if not imports:
            continue
        if relative not in ORACLE_IMPORTS_ALLOWED:
            unexpected += [f"kiln_verify/{relative}:{line}" for line, _ in imports]
        elif ORACLE_IMPORTS_ALLOWED[relative]:
            eager += [f"kiln_verify/{relative}:{line}" for line, lazy in imports if not lazy]
    assert unexpected == [], "only the oracle front ends may import `oracle`: " + ", ".join(
        unexpected
    )
    assert eager == [], "the embedded-default oracle must be imported lazily: " + ", ".join(eager)


def test_the_allowed_oracle_importers_exist() -> None:
    # Keeps the allow-list honest: a renamed or removed front end must be removed here too.
    assert (PACKAGE / "cli" / "oracle_cmd.py").is_file()
    assert (PACKAGE / "cli" / "embedded_oracle.py").is_file()


def test_the_scan_catches_a_mention() -> None:
    assert FORBIDDEN.search('os.environ["KILN_OPENENV_INTEROP_COUNTER_URL"]')
    assert FORBIDDEN.search("# talks to MiniOpenEnv")
    tree = ast.parse(
        "import oracle.runner\nfrom oracle import inventory\n"
        "def f():\n    from oracle.runner import start_server\n"
        "importlib.import_module('oracle.envs.bandit')\n"
    )
    assert _oracle_imports(tree) == [(1, False), (2, False), (4, True), (5, False)]
