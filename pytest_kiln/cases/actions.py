"""Deriving actions from an action schema: schema-valid candidates and a generic violation.

A valid candidate comes from the reset observation's legal moves first (``legal_actions``,
``legal_moves`` or ``valid_actions``, see :mod:`kiln_verify.openenv.policy.legal_moves`),
then from values built for the required properties. The builder honours ``const``,
``enum``, ``default``, numeric bounds and ``multipleOf``, string lengths, ``pattern`` (a
matching string built from the expression, :mod:`.patterns`) and a few ``format``\\ s,
``minItems``/``maxItems``/``uniqueItems``/``prefixItems``, nested objects with
``minProperties``, local ``$ref``, ``allOf`` (merged) and ``anyOf``/``oneOf`` (every
branch is tried). Where it cannot honour a keyword it records which one and where
(:attr:`ActionBuilder.notes`), so a case that finds no valid action can say what stopped
it. Callers check every candidate against the compiled schema; nothing here is trusted.

A violation gives the first required property the wrong JSON type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pytest_kiln.cases.patterns import string_for_pattern

if TYPE_CHECKING:
    from kiln_verify.openenv.protocol.wire import Observation

#: Alternatives kept per schema node, branches tried per ``anyOf``/``oneOf``, nesting depth.
MAX_VALUES = 6
MAX_BRANCHES = 8
MAX_DEPTH = 8
#: Arrays longer than this are not built (a ``minItems`` above it stops the builder).
MAX_ARRAY_ITEMS = 64
#: Keywords the builder does not try to satisfy; their presence is noted.
UNSUPPORTED = ("not", "if", "contains", "dependentRequired", "dependentSchemas",
               "propertyNames", "patternProperties", "$dynamicRef")
FORMATS: dict[str, str] = {
    "date-time": "2000-01-01T00:00:00Z",
    "date": "2000-01-01",
    "time": "00:00:00Z",
    "email": "a@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
}
_SKIPPED = frozenset({"metadata"})


def _types(node: dict[str, Any]) -> list[str]:
    value = node.get("type")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    if "properties" in node or "required" in node:
        return ["object"]
    if "items" in node or "prefixItems" in node or "minItems" in node:
        return ["array"]
    if "pattern" in node or "minLength" in node or "format" in node:
        return ["string"]
    if "minimum" in node or "maximum" in node or "multipleOf" in node:
        return ["number"]
    return ["string", "integer", "boolean"]


def _number(node: dict[str, Any], key: str) -> float | None:
    value = node.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(node: dict[str, Any], key: str) -> int | None:
    value = node.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unique(values: list[Any]) -> list[Any]:
    """Distinct values by JSON identity (``1``, ``1.0`` and ``true`` stay distinct)."""
    seen: list[tuple[str, Any]] = []
    out: list[Any] = []
    for value in values:
        key = (type(value).__name__, value)
        if key not in seen:
            seen.append(key)
            out.append(value)
    return out


class ActionBuilder:
    """Candidate values for one action schema; :attr:`notes` says what it could not honour."""

    def __init__(self, schema: Any) -> None:
        self.root: dict[str, Any] = schema if isinstance(schema, dict) else {}
        self.notes: list[str] = []

    def note(self, keyword: str, pointer: str) -> None:
        text = f"'{keyword}' at {pointer}"
        if text not in self.notes:
            self.notes.append(text)

    # -- schema plumbing ---------------------------------------------------------------------

    def resolve(self, node: Any, pointer: str) -> Any:
        """Follow local ``#/...`` references; an unresolvable one is noted."""
        for _ in range(MAX_DEPTH):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node
            ref: str = node["$ref"]
            target: Any = self.root
            if not ref.startswith("#"):
                self.note("$ref", pointer)
                return {}
            for part in [p for p in ref[1:].split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    self.note("$ref", pointer)
                    return {}
                target = target[part]
            siblings = {key: value for key, value in node.items() if key != "$ref"}
            node = {**target, **siblings} if isinstance(target, dict) and siblings else target
        return node

    def _merge_all_of(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        parts = node.get("allOf")
        if not isinstance(parts, list):
            return node
        merged = {key: value for key, value in node.items() if key != "allOf"}
        for index, part in enumerate(parts):
            part = self.resolve(part, f"{pointer}/allOf/{index}")
            if not isinstance(part, dict):
                continue
            for key, value in part.items():
                if key == "properties" and isinstance(value, dict):
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required" and isinstance(value, list):
                    merged["required"] = [*merged.get("required", []), *value]
                else:
                    merged.setdefault(key, value)
        return merged

    # -- values ------------------------------------------------------------------------------

    def values(self, node: Any, pointer: str = "$", depth: int = 0) -> list[Any]:
        """Up to ``MAX_VALUES`` plausible values for ``node``, most specific first."""
        node = self.resolve(node, pointer)
        if node is False:
            self.note("false", pointer)
            return []
        if not isinstance(node, dict) or not node:
            return ["a"]
        if depth > MAX_DEPTH:
            self.note("depth", pointer)
            return []
        node = self._merge_all_of(node, pointer)
        if "const" in node:
            return [node["const"]]
        enum = node.get("enum")
        if isinstance(enum, list):
            if not enum:
                self.note("enum", pointer)
            return list(enum[:MAX_VALUES])
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list):
                return self._branches(node, key, branches, pointer, depth)
        for keyword in UNSUPPORTED:
            if keyword in node:
                self.note(keyword, pointer)
        found: list[Any] = []
        if node.get("default") is not None:
            found.append(node["default"])
        for kind in _types(node):
            found.extend(self._of_kind(kind, node, pointer, depth))
        return _unique(found)[:MAX_VALUES]

    def _branches(self, node: dict[str, Any], key: str, branches: list[Any], pointer: str,
                  depth: int) -> list[Any]:
        base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf", "default")}
        found: list[Any] = []
        for index, branch in enumerate(branches[:MAX_BRANCHES]):
            where = f"{pointer}/{key}/{index}"
            resolved = self.resolve(branch, where)
            merged = {**base, **resolved} if isinstance(resolved, dict) else resolved
            found.extend(self.values(merged, where, depth + 1))
        # a nullable field is still sent with a value first; null comes last
        ordered = [value for value in found if value is not None]
        ordered += [value for value in found if value is None]
        return _unique(ordered)[:MAX_VALUES]

    def _of_kind(self, kind: str, node: dict[str, Any], pointer: str, depth: int) -> list[Any]:
        if kind == "integer":
            return self._integers(node, pointer)
        if kind == "number":
            return self._numbers(node, pointer)
        if kind == "string":
            return self._strings(node, pointer)
        if kind == "boolean":
            return [False, True]
        if kind == "null":
            return [None]
        if kind == "array":
            return self._arrays(node, pointer, depth)
        if kind == "object":
            built = self.object_value(node, pointer, depth)
            return [] if built is None else [built]
        self.note("type", pointer)
        return []

    def _integers(self, node: dict[str, Any], pointer: str) -> list[Any]:
        import math

        low = _number(node, "minimum")
        if _number(node, "exclusiveMinimum") is not None:
            low = math.floor(_number(node, "exclusiveMinimum") or 0) + 1
        high = _number(node, "maximum")
        if _number(node, "exclusiveMaximum") is not None:
            high = math.ceil(_number(node, "exclusiveMaximum") or 0) - 1
        start = math.ceil(low) if low is not None else None
        stop = math.floor(high) if high is not None else None
        step = node.get("multipleOf")
        picks = [start, start + 1] if start is not None else [0, 1]
        if stop is not None:
            picks.append(stop)
        found: list[Any] = []
        for pick in picks:
            if pick is None:
                continue
            if isinstance(step, int) and not isinstance(step, bool) and step > 0:
                pick = -(-pick // step) * step
            if (start is None or pick >= start) and (stop is None or pick <= stop):
                found.append(int(pick))
        if not found:
            self.note("minimum/maximum", pointer)
        return found

    def _numbers(self, node: dict[str, Any], pointer: str) -> list[Any]:
        low = _number(node, "minimum")
        high = _number(node, "maximum")
        floor = _number(node, "exclusiveMinimum")
        ceiling = _number(node, "exclusiveMaximum")
        picks: list[float] = []
        if low is not None:
            picks.append(low)
        if floor is not None:
            upper = high if high is not None else ceiling if ceiling is not None else floor + 2
            picks.append((floor + upper) / 2)
        picks += [0.0, 1.0, 0.5]
        found = [
            value for value in picks
            if (low is None or value >= low) and (high is None or value <= high)
            and (floor is None or value > floor) and (ceiling is None or value < ceiling)
        ]
        if not found:
            self.note("minimum/maximum", pointer)
        return found

    def _strings(self, node: dict[str, Any], pointer: str) -> list[Any]:
        low = max(_count(node, "minLength") or 0, 0)
        high = _count(node, "maxLength")
        if high is not None and high < low:
            self.note("minLength/maxLength", pointer)
            return []
        pattern = node.get("pattern")
        found: list[Any] = []
        if isinstance(pattern, str):
            text = string_for_pattern(pattern)
            if text is None:
                self.note("pattern", pointer)
                return []
            if len(text) < low or (high is not None and len(text) > high):
                self.note("pattern", pointer)
            found.append(text)
            return found
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in FORMATS:
            found.append(FORMATS[fmt])
        size = max(low, 1) if high is None else min(max(low, 1), high)
        if size > 4096:
            self.note("minLength", pointer)
            return found
        found += ["a" * size, "0" * size, "1" * size]
        return found

    def _arrays(self, node: dict[str, Any], pointer: str, depth: int) -> list[Any]:
        low = max(_count(node, "minItems") or 0, 0)
        high = _count(node, "maxItems")
        if (high is not None and high < low) or low > MAX_ARRAY_ITEMS:
            self.note("minItems", pointer)
            return []
        prefix = node.get("prefixItems")
        head: list[Any] = []
        if isinstance(prefix, list):
            for index, item in enumerate(prefix[:low]):
                options = self.values(item, f"{pointer}/prefixItems/{index}", depth + 1)
                if not options:
                    return []
                head.append(options[0])
        items = node.get("items", {})
        options = [] if items is False else self.values(items, f"{pointer}/items", depth + 1)
        need = low - len(head)
        if need > 0 and not options:
            self.note("items", pointer)
            return []
        if node.get("uniqueItems") is True and need > len(options):
            self.note("uniqueItems", pointer)
            return []
        if node.get("uniqueItems") is True:
            first = head + options[:need]
        else:
            first = head + [options[0]] * need if need > 0 else list(head)
        found = [first]
        if need > 0 and len(options) > 1 and node.get("uniqueItems") is not True:
            found.append(head + [options[1]] * need)
        if not first and options and (high is None or high >= 1):
            found.append([options[0]])
        return found

    def object_value(self, node: dict[str, Any], pointer: str, depth: int) -> dict[str, Any] | None:
        """The required properties, each with its first value; ``None`` if one has none."""
        properties = node.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = node.get("required")
        names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
        built: dict[str, Any] = {}
        for name in names:
            options = self.values(properties.get(name, {}), f"{pointer}/{name}", depth + 1)
            if not options:
                return None
            built[name] = options[0]
        wanted = _count(node, "minProperties") or 0
        for name, schema in properties.items():
            if len(built) >= wanted:
                break
            if name not in built and name not in _SKIPPED:
                options = self.values(schema, f"{pointer}/{name}", depth + 1)
                if options:
                    built[name] = options[0]
        if len(built) < wanted:
            self.note("minProperties", pointer)
        return built

    # -- actions -----------------------------------------------------------------------------

    def candidates(self, observation: Observation | None = None) -> Iterator[dict[str, Any]]:
        """Candidate actions: legal moves first, then objects built from the schema."""
        from kiln_verify.openenv.policy.legal_moves import legal_moves

        node = self._merge_all_of(self.resolve(self.root, "$"), "$")
        found = node.get("properties")
        properties: dict[str, Any] = found if isinstance(found, dict) else {}
        required = node.get("required")
        names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
        names = [name for name in names if name not in _SKIPPED]
        moves = legal_moves(observation.observation if observation is not None else None)
        if moves:
            if len(names) == 1:
                yield {names[0]: moves[0]}
            if isinstance(moves[0], dict):
                yield dict(moves[0])
        if any(isinstance(node.get(key), list) for key in ("anyOf", "oneOf")):
            for value in self.values(node):
                if isinstance(value, dict):
                    yield value
            return
        base = self.object_value(node, "$", 0)
        if base is None:
            return
        yield base
        for name in names:
            for value in self.values(properties.get(name, {}), f"$/{name}")[1:]:
                yield {**base, name: value}

    def stopped_by(self) -> str:
        """What the builder could not honour, for a NotApplicable message."""
        if not self.notes:
            return ""
        return "; the action builder cannot satisfy " + ", ".join(self.notes[:4])


def candidate_actions(
    schema: Any, observation: Observation | None = None
) -> Iterator[dict[str, Any]]:
    """Candidate valid actions (see :class:`ActionBuilder`)."""
    yield from ActionBuilder(schema).candidates(observation)


def sample_value(root: dict[str, Any], node: Any) -> Iterator[Any]:
    """Plausible values for a property schema of ``root``, most specific first."""
    yield from ActionBuilder(root).values(node)


def _wrong_type(builder: ActionBuilder, node: Any) -> Any:
    resolved = builder.resolve(node, "$")
    declared = resolved.get("type") if isinstance(resolved, dict) else None
    types = {declared} if isinstance(declared, str) else set(
        item for item in declared if isinstance(item, str)
    ) if isinstance(declared, list) else set()
    if types & {"string"}:
        return 12345
    if types & {"integer", "number", "boolean", "null"}:
        return "not-a-valid-value"
    if types & {"object", "array"}:
        return 0
    return {"kiln-conformance": ["unexpected"]}


def violating_action(schema: Any, valid: dict[str, Any]) -> dict[str, Any] | None:
    """A schema-violating action: a required property with the wrong JSON type."""
    builder = ActionBuilder(schema)
    node = builder.resolve(builder.root, "$")
    if not isinstance(node, dict):
        return None
    required = node.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    if names:
        found = node.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        return {**valid, names[0]: _wrong_type(builder, props.get(names[0], {}))}
    if node.get("additionalProperties") is False:
        return {**valid, "kiln_conformance_unknown_property": 1}
    return None
