"""Discovery documents (`/schema`, `/metadata`, `/openapi.json`), built once per server.

OpenEnv 0.10.0 answers `/schema` with pydantic's `model_json_schema()` of the action,
observation and base `State` models (plus `reset_observation`, new since 0.3.0), so
clients hash and compare those exact dictionaries. The oracle renders the same dictionaries
from an environment's declared fields: keys sorted the way pydantic sorts them, property
order as declared, the `metadata`/`done`/`reward` fields inherited from OpenEnv's base
classes, and no top-level `description` (pydantic only uses a class's own docstring).
"""

from __future__ import annotations

import copy
import importlib.resources
import json
from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, ObservationField

_ACTION_METADATA: Mapping[str, Any] = {
    "additionalProperties": True,
    "description": "Additional metadata for the action",
    "title": "Metadata",
    "type": "object",
}
_OBSERVATION_BASE: Mapping[str, Mapping[str, Any]] = {
    "done": {"default": False, "description": "Whether the episode has terminated",
             "title": "Done", "type": "boolean"},
    "reward": {"anyOf": [{"type": "boolean"}, {"type": "integer"}, {"type": "number"},
                         {"type": "null"}],
               "default": None, "description": "Reward signal from the last action",
               "title": "Reward"},
    "metadata": {"additionalProperties": True,
                 "description": "Additional metadata for the observation",
                 "title": "Metadata", "type": "object"},
}
#: OpenEnv's base `State` schema; `/schema.state` is always this one.
STATE_SCHEMA: Mapping[str, Any] = {
    "additionalProperties": True,
    "description": "Base class for environment state.\n\n"
                   "Represents internal environment state, separate from observations.",
    "properties": {
        "episode_id": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                       "description": "Unique identifier for the current episode",
                       "title": "Episode Id"},
        "step_count": {"default": 0,
                       "description": "Number of steps taken in the current episode",
                       "minimum": 0, "title": "Step Count", "type": "integer"},
    },
    "title": "State",
    "type": "object",
}
#: What `/metadata.version` and the action schema say once `identity-drift` has fired.
DRIFT_SUFFIX = "+drift"


def title(name: str) -> str:
    """pydantic's default field title: `input_text` -> `Input Text`."""
    return name.title().replace("_", " ")


def _sorted(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {key: schema[key] for key in sorted(schema)}


def action_property(field: ActionField) -> dict[str, Any]:
    if field.required:
        return {"description": field.description, "title": title(field.name),
                "type": field.type}
    return {"anyOf": [{"type": field.type}, {"type": "null"}], "default": None,
            "description": field.description, "title": title(field.name)}


def action_schema(env: type[Environment]) -> dict[str, Any]:
    properties: dict[str, Any] = {"metadata": dict(_ACTION_METADATA)}
    for field in env.action_fields:
        properties[field.name] = action_property(field)
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    required = [field.name for field in env.action_fields if field.required]
    if required:
        schema["required"] = required
    schema["title"] = env.action_title
    schema["type"] = "object"
    return schema


def observation_property(field: ObservationField) -> dict[str, Any]:
    schema = _pydantic_nullable(field.schema)
    schema["description"] = field.description
    schema["title"] = title(field.name)
    return _sorted(schema)


def _pydantic_nullable(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`{"type": [T, "null"], ...}` the way pydantic renders `Optional[T]`.

    pydantic writes `{"anyOf": [{<T and its constraints>}, {"type": "null"}]}` and keeps
    only `default`, `description` and `title` outside, so a nullable field declared in the
    compact JSON Schema form still hashes like OpenEnv's model of the same field.
    """
    kind = schema.get("type")
    if not (isinstance(kind, list) and len(kind) == 2 and "null" in kind):
        return dict(schema)
    outer = {key: schema[key] for key in ("default", "description", "title") if key in schema}
    inner = {key: value for key, value in schema.items() if key not in outer}
    inner["type"] = kind[0] if kind[1] == "null" else kind[1]
    outer["anyOf"] = [_sorted(inner), {"type": "null"}]
    return outer


def observation_schema(env: type[Environment]) -> dict[str, Any]:
    properties: dict[str, Any] = {name: dict(value) for name, value in _OBSERVATION_BASE.items()}
    for field in env.observation_fields:
        properties[field.name] = observation_property(field)
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    required = [f.name for f in env.observation_fields if "default" not in f.schema]
    if required:
        schema["required"] = required
    schema["title"] = env.observation_title
    schema["type"] = "object"
    return schema


def schema_document(env: type[Environment], *, drifted: bool = False) -> dict[str, Any]:
    """The `/schema` body: action, observation, state, reset_observation (0.10.0 order)."""
    fixed = env.fixed_schemas
    action = copy.deepcopy(dict(fixed["action"])) if fixed else action_schema(env)
    if drifted:
        action["description"] = f"{env.action_title} (identity drifted{DRIFT_SUFFIX})"
        action = _sorted(action)
    observation = copy.deepcopy(dict(fixed["observation"])) if fixed else observation_schema(env)
    return {"action": action, "observation": observation, "state": dict(STATE_SCHEMA),
            "reset_observation": observation}


def metadata_document(env: type[Environment], *, drifted: bool = False) -> dict[str, Any]:
    """`EnvironmentMetadata`: exactly these six keys, in this order."""
    return {
        "name": env.class_name,
        "description": env.description,
        "readme_content": env.readme,
        "version": env.version + DRIFT_SUFFIX if drifted else env.version,
        "author": None,
        "documentation_url": None,
    }


def openapi_document() -> bytes:
    """The OpenAPI 3.1.0 document an OpenEnv 0.10.0 `create_fastapi_app` server serves.

    It does not depend on the environment (every model in it is generic), so it ships as
    data; `tests/oracle/test_http_surface.py` regenerates it from OpenEnv when available.
    """
    raw = importlib.resources.files("oracle").joinpath("data/openapi.json").read_bytes()
    return json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()
