"""The ``random`` policy: a uniformly random legal or schema-valid action, seeded per step.

All randomness comes from ``random.Random(request.generation_seed)``, so the same seed
always gives the same action text. When the observation lists legal moves (``legal_actions``,
``legal_moves`` or ``valid_actions``, at the top level or in ``metadata``; see
:mod:`.legal_moves`) one of them is chosen uniformly: an object item is the action itself;
any other item is the value of the schema's single required property (a schema ``enum`` on
that property is the same kind of list, and is sampled uniformly). Otherwise a value is
sampled from the
action schema: only required properties (never ``metadata``), ``const``, ``enum``,
``anyOf``/``oneOf`` (one branch), ``allOf`` (the first object branch), local ``$ref``,
integers within ``minimum``/``maximum`` (default 0..9), numbers in [min, max] (default
[0, 1)), strings from ``a-z`` within ``minLength``/``maxLength`` (default 1..8), booleans,
null and arrays of ``minItems`` items. The text is the compact JSON of the action.
"""

from __future__ import annotations

import math
import random
from typing import Any

from kiln_verify.core.jsonenc import dumps_compact
from kiln_verify.openenv.policy.base import BehaviorPolicyIdentity, PolicyRequest, PolicyResponse
from kiln_verify.openenv.policy.legal_moves import legal_moves

_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_MAX_DEPTH = 8
_DEFAULT_INT_SPAN = 9
_DEFAULT_STR_SPAN = 7
_SKIPPED_PROPERTIES = frozenset({"metadata"})


def _resolve(root: Any, node: Any) -> Any:
    for _ in range(_MAX_DEPTH):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
            return node
        ref: str = node["$ref"]
        if not ref.startswith("#"):
            return node
        target = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return node
            target = target[part]
        node = target
    return node


def _number(node: dict[str, Any], key: str, exclusive: str) -> tuple[float | None, bool]:
    if isinstance(node.get(exclusive), int | float) and not isinstance(node[exclusive], bool):
        return float(node[exclusive]), True
    value = node.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), False
    return None, False


def _integer(rng: random.Random, node: dict[str, Any]) -> int:
    low_f, low_excl = _number(node, "minimum", "exclusiveMinimum")
    high_f, high_excl = _number(node, "maximum", "exclusiveMaximum")
    low = None if low_f is None else math.floor(low_f) + 1 if low_excl else math.ceil(low_f)
    high = None if high_f is None else math.ceil(high_f) - 1 if high_excl else math.floor(high_f)
    if low is None and high is None:
        low, high = 0, _DEFAULT_INT_SPAN
    elif low is None:
        assert high is not None
        low = high - _DEFAULT_INT_SPAN
    elif high is None:
        high = low + _DEFAULT_INT_SPAN
    return rng.randint(low, max(low, high))


def _float(rng: random.Random, node: dict[str, Any]) -> float:
    low, _ = _number(node, "minimum", "exclusiveMinimum")
    high, _ = _number(node, "maximum", "exclusiveMaximum")
    low = 0.0 if low is None else low
    high = low + 1.0 if high is None else high
    value = rng.uniform(low, high) if high > low else low
    if value <= low and "exclusiveMinimum" in node:
        value = (low + high) / 2
    if value >= high and "exclusiveMaximum" in node:
        value = (low + high) / 2
    return value


def _string(rng: random.Random, node: dict[str, Any]) -> str:
    min_len = node.get("minLength")
    max_len = node.get("maxLength")
    low = min_len if isinstance(min_len, int) and not isinstance(min_len, bool) else 1
    low = max(0, min(low, 64))
    high = (
        max_len
        if isinstance(max_len, int) and not isinstance(max_len, bool)
        else low + _DEFAULT_STR_SPAN
    )
    high = max(low, min(high, low + _DEFAULT_STR_SPAN))
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(low, high)))


def sample_value(rng: random.Random, root: Any, node: Any, depth: int = 0) -> Any:
    """One random value for the schema ``node`` (a best effort for the common shapes)."""
    node = _resolve(root, node)
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return None if node is False else {}
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return rng.choice(node["enum"])
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and branches:
            return sample_value(rng, root, rng.choice(branches), depth + 1)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and all_of and "type" not in node and "properties" not in node:
        return sample_value(rng, root, all_of[0], depth + 1)
    types = node.get("type")
    kinds = [types] if isinstance(types, str) else [t for t in types or [] if isinstance(t, str)]
    if not kinds:
        kinds = ["object"] if "properties" in node else ["string"]
    kind = rng.choice(kinds)
    if kind == "integer":
        return _integer(rng, node)
    if kind == "number":
        return _float(rng, node)
    if kind == "string":
        return _string(rng, node)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        count = node.get("minItems")
        count = count if isinstance(count, int) and not isinstance(count, bool) else 0
        return [
            sample_value(rng, root, node.get("items", {}), depth + 1) for _ in range(min(count, 64))
        ]
    return sample_object(rng, root, node, depth + 1)


def sample_object(
    rng: random.Random, root: Any, node: dict[str, Any], depth: int = 0
) -> dict[str, Any]:
    """The required properties of an object schema (``metadata`` never), each sampled."""
    props = node.get("properties")
    props = props if isinstance(props, dict) else {}
    required = node.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    return {
        name: sample_value(rng, root, props.get(name, {}), depth)
        for name in names
        if name not in _SKIPPED_PROPERTIES
    }


def random_action(action_schema: Any, observation: Any, seed: int) -> dict[str, Any]:
    """The action the ``random`` policy sends for ``seed`` (pure; used by tests and docs)."""
    rng = random.Random(seed)
    root = action_schema if isinstance(action_schema, dict) else {}
    node = _resolve(root, root)
    node = node if isinstance(node, dict) else {}
    legal = legal_moves(observation)
    required = node.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    names = [n for n in names if n not in _SKIPPED_PROPERTIES]
    if legal:
        choice = rng.choice(legal)
        if isinstance(choice, dict):
            return dict(choice)
        if len(names) == 1:
            return {names[0]: choice}
    return sample_object(rng, root, node)


class RandomPolicy:
    """Uniform random actions; zero latency, zero tokens, fully determined by the seed."""

    def __init__(self, *, name: str = "random") -> None:
        self._name = name

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        action = random_action(request.action_schema, request.observation, request.generation_seed)
        return PolicyResponse(text=dumps_compact(action).decode("utf-8"))

    def identity(self) -> BehaviorPolicyIdentity:
        return BehaviorPolicyIdentity(
            kind="random", name=self._name, parameters={"algorithm": "python-random-mt19937/v1"}
        )

    async def aclose(self) -> None:
        return None
