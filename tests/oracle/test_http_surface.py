"""The HTTP surface: discovery documents, stateless `/reset` `/step` `/state`, the Task API."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, create_model

from oracle import schemas
from oracle.base import ObservationField
from oracle.runner import ServerHandle
from oracle.validation import reset_body_errors, step_body_errors
from tests.oracle.serverkit import Start, TaskEnvironment, TinyEnvironment


@pytest.fixture(scope="module")
def client(tiny: ServerHandle) -> Any:
    with httpx.Client(base_url=tiny.base_url, timeout=10) as session:
        yield session


def test_health(client: httpx.Client) -> None:
    reply = client.get("/health")
    assert (reply.status_code, reply.json()) == (200, {"status": "healthy"})
    assert reply.headers["content-type"] == "application/json"


def test_metadata_has_exactly_openenvs_fields(client: httpx.Client) -> None:
    assert client.get("/metadata").json() == {
        "name": "TinyEnvironment",
        "description": TinyEnvironment.description,
        "readme_content": "# tiny\n",
        "version": "1.0.0",
        "author": None,
        "documentation_url": None,
    }


def test_list_environments(client: httpx.Client) -> None:
    assert client.get("/list_environments").json() == ["tiny_env"]


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Additional metadata for the action"
    )


class _Observation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    done: bool = Field(default=False, description="Whether the episode has terminated")
    reward: bool | int | float | None = Field(
        default=None, description="Reward signal from the last action"
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Additional metadata for the observation"
    )


def test_schema_equals_pydantic_models_of_the_same_fields(client: httpx.Client) -> None:
    action = create_model(
        "TinyAction",
        __base__=_Action,
        amount=(StrictInt, Field(description="Added to the total.")),
        note=(StrictStr | None, Field(default=None, description="Echoed back.")),
    )
    observation = create_model(
        "TinyObservation",
        __base__=_Observation,
        total=(int, Field(description="The running total.")),
        input_text=(str, Field(description="A prompt.")),
        note=(str, Field(default="", description="The last note.")),
    )
    document = client.get("/schema").json()
    assert list(document) == ["action", "observation", "state", "reset_observation"]
    assert document["action"] == action.model_json_schema()
    assert document["observation"] == observation.model_json_schema()
    assert document["reset_observation"] == document["observation"]
    assert document["state"] == schemas.STATE_SCHEMA


def test_nullable_observation_fields_render_like_optional() -> None:
    model = create_model(
        "Nullable",
        __base__=_Observation,
        count=(int | None, Field(ge=0, description="A count.")),
        names=(list[str] | None, Field(default=None, description="Names.")),
    )
    expected = model.model_json_schema()["properties"]
    fields = {
        "count": ObservationField("count", {"type": ["integer", "null"], "minimum": 0}, "A count."),
        "names": ObservationField(
            "names",
            {"type": ["array", "null"], "items": {"type": "string"}, "default": None},
            "Names.",
        ),
    }
    for name, field in fields.items():
        assert schemas.observation_property(field) == expected[name]


def test_openapi_document(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["version"] == "1.0.0"
    assert set(document["paths"]) == {
        "/list_environments",
        "/{env_name}/splits",
        "/{env_name}/tasks",
        "/{env_name}/num_tasks",
        "/{env_name}/task",
        "/{env_name}/task_range",
        "/reset",
        "/step",
        "/state",
        "/metadata",
        "/health",
        "/schema",
        "/mcp",
    }
    assert "/ws" not in document["paths"]


def test_openapi_document_is_what_openenv_generates() -> None:
    """Provenance of `oracle/data/openapi.json`: regenerate it from OpenEnv 0.10.0."""
    http_server = pytest.importorskip("openenv.core.env_server.http_server")
    types = pytest.importorskip("openenv.core.env_server.types")
    interfaces = pytest.importorskip("openenv.core.env_server.interfaces")

    base: Any = interfaces.Environment

    class Probe(base):  # type: ignore[misc]
        def reset(self, seed: Any = None, episode_id: Any = None, **kw: Any) -> Any:
            return types.Observation()

        def step(self, action: Any, **kw: Any) -> Any:
            return types.Observation()

        @property
        def state(self) -> Any:
            return types.State()

    app = http_server.create_fastapi_app(Probe, types.Action, types.Observation, mode="simulation")
    assert json.loads(schemas.openapi_document()) == app.openapi()


# -- stateless HTTP episodes -----------------------------------------------------------------


def test_http_reset_step_state_are_stateless(client: httpx.Client) -> None:
    reset = client.post("/reset", json={"seed": 4, "start": 7, "unknown": 1})
    assert reset.json() == {
        "observation": {"metadata": {}, "total": 7, "input_text": "total is 7", "note": ""},
        "reward": None,
        "done": False,
        "metadata": None,
    }
    assert client.post("/reset").status_code == 200  # the body is optional
    for amount, reward in ((1, 1.0), (2, 2.0), (3, 3.0)):  # bool/int rewards become floats
        reply = client.post("/step", json={"action": {"amount": amount}, "timeout_s": 1})
        assert reply.json()["reward"] == reward
        assert isinstance(reply.json()["reward"], float)
        assert reply.json()["observation"]["total"] == amount  # a fresh environment each time
    assert client.get("/state").json() == {"episode_id": None, "step_count": 0}


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        (
            "/reset",
            {"seed": -3},
            [
                {
                    "type": "greater_than_equal",
                    "loc": ["body", "seed"],
                    "msg": "Input should be greater than or equal to 0",
                    "input": -3,
                    "ctx": {"ge": 0},
                }
            ],
        ),
        (
            "/reset",
            [1],
            [
                {
                    "type": "model_attributes_type",
                    "loc": ["body"],
                    "msg": "Input should be a valid dictionary or object to extract fields from",
                    "input": [1],
                }
            ],
        ),
        (
            "/step",
            {},
            [{"type": "missing", "loc": ["body", "action"], "msg": "Field required", "input": {}}],
        ),
        (
            "/step",
            {"action": {"amount": "x", "y": 1}},
            [
                {
                    "type": "int_type",
                    "loc": ["amount"],
                    "msg": "Input should be a valid integer",
                    "input": "x",
                    "url": "https://errors.pydantic.dev/2.14/v/int_type",
                },
                {
                    "type": "extra_forbidden",
                    "loc": ["y"],
                    "msg": "Extra inputs are not permitted",
                    "input": 1,
                    "url": "https://errors.pydantic.dev/2.14/v/extra_forbidden",
                },
            ],
        ),
    ],
)
def test_http_validation_errors_are_422(
    client: httpx.Client, path: str, body: Any, detail: Any
) -> None:
    reply = client.post(path, json=body)
    assert (reply.status_code, reply.json()) == (422, {"detail": detail})


def test_http_body_edge_cases(client: httpx.Client) -> None:
    assert client.post("/step").json() == {
        "detail": [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
    }
    bad = client.post("/reset", content=b"{bad", headers={"content-type": "application/json"})
    assert bad.json()["detail"][0]["type"] == "json_invalid"
    assert bad.json()["detail"][0]["loc"] == ["body", 1]
    text = client.post("/reset", content=b'{"seed":1}', headers={"content-type": "text/plain"})
    assert text.json()["detail"][0]["input"] == '{"seed":1}'
    utf = client.post("/reset", content=b"\xff", headers={"content-type": "application/json"})
    assert (utf.status_code, utf.json()) == (400, {"detail": "There was an error parsing the body"})
    huge = client.post("/reset", content=b"x" * (1024 * 1024 + 1))
    assert (huge.status_code, huge.json()) == (413, {"detail": "Request body too large"})


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    action: dict[str, Any]
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)


@pytest.mark.parametrize(
    "body",
    [
        {"seed": 1.5, "episode_id": 5},
        {"seed": " 7 "},
        {"seed": True},
        {"seed": "x"},
        {"seed": [1]},
        {"episode_id": "e" * 256},
        {"seed": 3, "extra": [1]},
        {"seed": 2.0},
    ],
)
def test_reset_body_errors_match_pydantic(body: dict[str, Any]) -> None:
    kwargs, errors = reset_body_errors(body)
    assert errors == _fastapi_errors(ResetRequest, body)
    if not errors:
        assert kwargs == ResetRequest.model_validate(body).model_dump(exclude_unset=True)


@pytest.mark.parametrize(
    "body",
    [
        {"action": 5},
        {"action": {}, "timeout_s": 0},
        {"action": {}, "timeout_s": "abc"},
        {"action": {}, "request_id": 5},
        {"timeout_s": -1},
        {"action": {}, "timeout_s": "2.5"},
        {"action": {}, "timeout_s": [1], "request_id": "r" * 300},
    ],
)
def test_step_body_errors_match_pydantic(body: dict[str, Any]) -> None:
    assert step_body_errors(body) == _fastapi_errors(StepRequest, body)


def _fastapi_errors(model: type[BaseModel], body: dict[str, Any]) -> list[dict[str, Any]]:
    """FastAPI's rendering of pydantic errors for a body model: `body` prefix, no `url`."""
    try:
        model.model_validate(body)
    except Exception as exc:
        errors = json.loads(json.dumps(exc.errors(), default=str))  # type: ignore[attr-defined]
        return [
            {**{k: v for k, v in e.items() if k != "url"}, "loc": ["body", *e["loc"]]}
            for e in errors
        ]
    return []


def test_http_environment_exception_is_a_plain_500(tiny: ServerHandle) -> None:
    for amount in (99, 13):
        with httpx.Client(base_url=tiny.base_url) as client:
            reply = client.post("/step", json={"action": {"amount": amount}})
            assert (reply.status_code, reply.text) == (500, "Internal Server Error")
            assert reply.headers["content-type"] == "text/plain; charset=utf-8"
            assert reply.headers["connection"] == "close"  # as OpenEnv's server does


def test_routing_errors(client: httpx.Client) -> None:
    assert (client.get("/nope").status_code, client.get("/nope").json()) == (
        404,
        {"detail": "Not Found"},
    )
    assert client.get("/ws").status_code == 404  # no upgrade, no route
    wrong = client.post("/health")
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "GET")
    assert client.get("/reset").headers["allow"] == "POST"
    assert client.get("/tiny_env/tasks").status_code == 405
    slash = client.get("/health/")
    assert slash.status_code == 307
    assert slash.headers["location"].endswith("/health")


def test_http_mcp_always_answers_200(client: httpx.Client) -> None:
    listed = client.post("/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1})
    assert listed.json()["error"]["message"] == "Environment does not support MCP"
    assert client.post("/mcp", content=b"{bad").json()["error"] == {
        "code": -32700,
        "message": "Parse error",
        "data": None,
    }
    empty = client.post("/mcp", json={})
    assert empty.status_code == 200
    assert empty.json()["error"]["code"] == -32600
    unknown = client.post(
        "/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "params": {"session_id": "s1"}}
    )
    assert unknown.json()["error"]["message"] == "Unknown session_id: s1"


# -- Task API --------------------------------------------------------------------------------

TASK_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "splits", None),
    ("POST", "tasks", {"split": "train"}),
    ("POST", "num_tasks", {"split": "train"}),
    ("POST", "task", {"split": "train", "index": 0}),
    ("POST", "task_range", {"split": "train"}),
]
METHOD_NAMES = {
    "splits": "list_splits",
    "tasks": "list_tasks",
    "num_tasks": "num_tasks",
    "task": "get_task",
    "task_range": "get_task_range",
}


@pytest.mark.parametrize(("method", "route", "body"), TASK_ROUTES)
def test_task_api_without_tasks_is_501(
    client: httpx.Client, method: str, route: str, body: dict[str, Any] | None
) -> None:
    reply = client.request(method, f"/TINY_ENV/{route}", json=body)
    assert (reply.status_code, reply.json()) == (
        501,
        {"detail": f"{METHOD_NAMES[route]} is not supported for this environment"},
    )
    other = client.request(method, f"/other_env/{route}", json=body)
    assert (other.status_code, other.json()) == (404, {"detail": "unknown environment 'other_env'"})


def test_task_api_with_tasks(start: Start) -> None:
    server = start(TaskEnvironment)
    with httpx.Client(base_url=server.base_url) as client:
        assert client.get("/list_environments").json() == ["Task_Env"]
        assert client.get("/task_env/splits").json() == [
            {"name": "train", "type": "train"},
            {"name": "test", "type": "test"},
        ]
        rows = [{"split": "train", "index": i} for i in range(5)]
        assert client.post("/task_env/tasks", json={"split": "train"}).json() == {
            "tasks": rows,
            "env_name": "Task_Env",
        }
        assert client.post("/Task_Env/num_tasks", json={"split": "test"}).json() == {"num_tasks": 2}
        assert client.post("/task_env/task", json={"split": "train", "index": 4}).json() == {
            "task": rows[4]
        }
        ranged = client.post("/task_env/task_range", json={"split": "train", "start": 1, "stop": 3})
        assert ranged.json() == {"tasks": rows[1:3]}
        open_start = {"split": "train", "start": None, "stop": -1}
        assert client.post("/task_env/task_range", json=open_start).json() == {"tasks": rows[:-1]}
        for body in (
            {"split": "train", "index": 5},
            {"split": "train", "index": -1},
            {"split": "nope", "index": 0},
        ):
            bad = client.post("/task_env/task", json=body)
            assert (bad.status_code, bad.json()) == (400, {"detail": "Invalid task index"})
        assert client.post("/task_env/num_tasks", json={"split": "nope"}).status_code == 400
        invalid = client.post("/other/tasks", json={"x": 1})  # 422 is checked before 404
        assert (invalid.status_code, invalid.json()) == (
            422,
            {
                "detail": [
                    {
                        "type": "missing",
                        "loc": ["body", "split"],
                        "msg": "Field required",
                        "input": {"x": 1},
                    },
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "x"],
                        "msg": "Extra inputs are not permitted",
                        "input": 1,
                    },
                ]
            },
        )
        index = client.post("/task_env/task", json={"split": "train", "index": "a"})
        assert index.json()["detail"][0]["type"] == "int_parsing"
        assert client.post("/task_env/tasks").json()["detail"][0]["loc"] == ["body"]


def test_metadata_documents_are_precomputed_bytes(tiny: ServerHandle) -> None:
    context = tiny.app.ctx
    assert re.fullmatch(rb"\{.*\}", context.documents.schema)
    assert httpx.get(tiny.base_url + "/schema").content == context.documents.schema
