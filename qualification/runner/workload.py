"""Reading a workload: where it may live, that it is committed, its schema, its variables.

A workload is only evidence of anything if the receipt can name its exact committed bytes,
so the file must sit in ``qualification/workloads/`` and equal ``git show HEAD:<path>``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from .common import WORKLOAD_SCHEMA, Refusal, sha256_bytes, strict_json
from .gitstate import committed_bytes

PLACEHOLDER = re.compile(r"\$\{([a-z][a-z0-9_]*)\}")
VARIABLE_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,4095})")
NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
#: Placeholders the runner fills itself; a workload may not declare variables with these names.
RUNNER_OWNED = (
    "repo", "run_dir", "work_dir", "model_path", "model_id", "variant", "device", "runner_python",
)  # fmt: skip
Scalar = str | int | float | bool


@dataclass(frozen=True)
class Workload:
    relpath: str
    sha256: str
    data: dict[str, Any]

    @property
    def workload_id(self) -> str:
        return str(self.data["workload_id"])


def load_schema(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = strict_json(path.read_bytes())
    return schema


def load_workload(repo: Path, given: str, commit: str) -> Workload:
    path = Path(given)
    absolute = (path if path.is_absolute() else Path.cwd() / path).absolute()
    workloads = repo / "qualification" / "workloads"
    if absolute.parent != workloads or absolute.suffix != ".json" or absolute.is_symlink():
        raise Refusal(
            "workload-location",
            f"{given} is not a .json file directly inside qualification/workloads/",
            "pass a committed qualification/workloads/NAME.json",
        )
    if not absolute.is_file():
        raise Refusal("workload-missing", f"{given} does not exist", "pass an existing workload")
    relpath = absolute.relative_to(repo).as_posix()
    data = absolute.read_bytes()
    if committed_bytes(repo, commit, relpath) != data:
        raise Refusal(
            "workload-uncommitted",
            f"{relpath} is not byte-identical to git show HEAD:{relpath}",
            "commit the workload before qualifying with it",
        )
    try:
        parsed = strict_json(data)
        jsonschema.validate(parsed, load_schema(WORKLOAD_SCHEMA))
    except (ValueError, jsonschema.ValidationError) as error:
        raise Refusal(
            "workload-invalid", f"{relpath}: {_short(error)}", "fix the workload"
        ) from None
    check_semantics(parsed, relpath)
    return Workload(relpath=relpath, sha256=sha256_bytes(data), data=parsed)


def _short(error: Exception) -> str:
    if isinstance(error, jsonschema.ValidationError):
        where = "/".join(str(part) for part in error.absolute_path)
        return f"at /{where}: {error.message[:300]}"
    return str(error)[:300]


def check_semantics(data: dict[str, Any], relpath: str) -> None:
    """Cross-references a JSON Schema cannot express."""

    def bad(message: str) -> Refusal:
        return Refusal("workload-invalid", f"{relpath}: {message}", "fix the workload")

    declared: dict[str, dict[str, Any]] = data["variables"]
    for name, spec in declared.items():
        if name in RUNNER_OWNED:
            raise bad(f"variable {name!r} is runner-owned")
        for value in [spec.get("default"), *spec.get("allowed_values", [])]:
            if value is not None and not _typed(value, spec["type"]):
                raise bad(f"variable {name!r}: {value!r} is not a {spec['type']}")
    for variant, spec in data["variants"].items():
        for name, value in spec["variables"].items():
            if name not in declared:
                raise bad(f"variant {variant!r} sets undeclared variable {name!r}")
            problem = _value_problem(name, value, declared[name])
            if problem is not None:
                raise bad(f"variant {variant!r}: {problem}")
    known = set(declared) | set(RUNNER_OWNED)
    ids: set[str] = set()
    for step in data["steps"]:
        if step["id"] in ids:
            raise bad(f"step id {step['id']!r} is repeated")
        ids.add(step["id"])
        texts: list[str] = list(step.get("env", {}).values())
        for item in step["argv"]:
            if isinstance(item, dict):
                if declared.get(item["if"], {}).get("type") != "boolean":
                    raise bad(
                        f"step {step['id']!r}: 'if' needs a boolean variable, not {item['if']!r}"
                    )
                texts.extend(item["then"])
            else:
                texts.append(item)
        for text in texts:
            for name in PLACEHOLDER.findall(text):
                if name not in known:
                    raise bad(f"step {step['id']!r} uses unknown placeholder ${{{name}}}")
    for rule in data["evidence"]["required_metrics"]:
        if rule["step"] not in ids:
            raise bad(f"evidence names unknown step {rule['step']!r}")


def _typed(value: Scalar, kind: str) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)


def _value_problem(name: str, value: Scalar, spec: dict[str, Any]) -> str | None:
    if not _typed(value, spec["type"]):
        return f"variable {name!r} must be a {spec['type']}, got {value!r}"
    allowed = spec.get("allowed_values")
    if allowed is not None and value not in allowed:
        return f"variable {name!r} must be one of {allowed}, got {value!r}"
    return None


def parse_cli_value(name: str, text: str, kind: str) -> Scalar:
    if kind == "string":
        return text
    if kind == "boolean" and text in ("true", "false"):
        return text == "true"
    if kind == "integer" and INTEGER.fullmatch(text):
        return int(text)
    if kind == "number" and NUMBER.fullmatch(text) and math.isfinite(float(text)):
        return int(text) if INTEGER.fullmatch(text) else float(text)
    raise Refusal(
        "variable-type", f"--var {name}={text!r} is not a {kind}", f"pass a {kind} for {name}"
    )


def resolve_variables(workload: Workload, variant: str, cli: list[str]) -> dict[str, Scalar]:
    """Variant values, then --var values, then defaults; anything unresolved is refused."""
    declared: dict[str, dict[str, Any]] = workload.data["variables"]
    fixed: dict[str, Scalar] = workload.data["variants"][variant]["variables"]
    given: dict[str, Scalar] = {}
    for item in cli:
        name, sep, text = item.partition("=")
        if not sep or VARIABLE_NAME.fullmatch(name) is None:
            raise Refusal(
                "variable-syntax", f"--var {item!r} is not NAME=VALUE", "use --var NAME=VALUE"
            )
        if name in given:
            raise Refusal("variable-repeated", f"--var {name} is given twice", "give it once")
        if name not in declared:
            raise Refusal(
                "variable-unknown",
                f"workload {workload.workload_id} declares no variable {name!r}",
                f"use one of: {', '.join(sorted(declared)) or '(none)'}",
            )
        if name in fixed:
            raise Refusal(
                "variable-fixed",
                f"variable {name!r} is fixed by variant {variant!r}",
                "drop the --var or choose another variant",
            )
        value = parse_cli_value(name, text, declared[name]["type"])
        problem = _value_problem(name, value, declared[name])
        if problem is not None:
            raise Refusal("variable-value", problem, f"pass an allowed value for {name}")
        given[name] = value
    resolved: dict[str, Scalar] = {}
    for name, spec in sorted(declared.items()):
        if name in fixed:
            resolved[name] = fixed[name]
        elif name in given:
            resolved[name] = given[name]
        elif "default" in spec:
            resolved[name] = spec["default"]
        else:
            raise Refusal(
                "variable-missing", f"variable {name!r} has no value", f"pass --var {name}=..."
            )
    return resolved


def render(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def expand(text: str, values: dict[str, Scalar]) -> str:
    return PLACEHOLDER.sub(lambda match: render(values[match.group(1)]), text)


def expand_argv(argv: list[Any], values: dict[str, Scalar]) -> list[str]:
    out: list[str] = []
    for item in argv:
        if isinstance(item, dict):
            if values[item["if"]] is True:
                out.extend(expand(text, values) for text in item["then"])
        else:
            out.append(expand(item, values))
    return out
