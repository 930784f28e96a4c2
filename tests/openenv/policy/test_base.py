"""generation_seed (kiln-openenv-contract §5.4), provenance invariants, identities, scripted,
random and the registry."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kiln_verify.errors import (
    JsonDuplicateKey,
    LimitExceeded,
    PolicyConfigInvalid,
    PolicyScriptExhausted,
    PolicyScriptInvalid,
)
from kiln_verify.limits import MAX_POLICY_SCRIPT_BYTES
from kiln_verify.openenv.policy.base import (
    ZERO_CLOCK,
    BehaviorPolicyIdentity,
    Policy,
    PolicyRequest,
    generation_seed,
)
from kiln_verify.openenv.policy.random_policy import RandomPolicy, random_action
from kiln_verify.openenv.policy.registry import build_policy, parse_policy_options
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.records import SamplingParameters, TokenProvenance

MASK = (1 << 64) - 1


def _request(step: int = 0, candidate: int = 0, **kwargs: Any) -> PolicyRequest:
    kwargs.setdefault("messages", [{"role": "user", "content": "hi"}])
    kwargs.setdefault("action_schema", {})
    return PolicyRequest.for_step(seed=7, candidate_index=candidate, step_index=step, **kwargs)


# --- generation seeds ---------------------------------------------------------------


def test_generation_seed_golden_values() -> None:
    assert generation_seed(7, 0, 0) == 7
    assert generation_seed(0, 1, 0) == 0x9E3779B97F4A7C15
    assert generation_seed(0, 0, 1) == 0xBF58476D1CE4E5B9
    assert generation_seed(0, 2, 0) == 0x3C6EF372FE94F82A  # wrapped 2 * 0x9E37...
    assert generation_seed(5, 3, 4) == (
        5 ^ ((3 * 0x9E3779B97F4A7C15) & MASK) ^ ((4 * 0xBF58476D1CE4E5B9) & MASK)
    )
    assert generation_seed(MASK, 255, 255) <= MASK


def test_generation_seed_matches_wrapping_u64_arithmetic() -> None:
    rng = random.Random(1)
    for _ in range(200):
        seed, cand, step = rng.getrandbits(64), rng.randrange(256), rng.randrange(256)
        a = (cand * 0x9E3779B97F4A7C15) % (1 << 64)
        b = (step * 0xBF58476D1CE4E5B9) % (1 << 64)
        assert generation_seed(seed, cand, step) == seed ^ a ^ b


@pytest.mark.parametrize(
    ("seed", "cand", "step"), [(-1, 0, 0), (1 << 64, 0, 0), (0, -1, 0), (True, 0, 0)]
)
def test_generation_seed_rejects_out_of_range(seed: int, cand: int, step: int) -> None:
    with pytest.raises(PolicyConfigInvalid):
        generation_seed(seed, cand, step)


def test_request_for_step_derives_the_seed() -> None:
    request = _request(step=2, candidate=1)
    assert request.generation_seed == generation_seed(7, 1, 2)
    assert ZERO_CLOCK() == 0.0


# --- provenance and identity --------------------------------------------------------


def _prov(**kwargs: Any) -> TokenProvenance:
    base: dict[str, Any] = {
        "prompt_token_ids": (10, 11),
        "completion_token_ids": (22, 23),
        "behavior_logprobs": (-0.25, None),
        "sources": ("sampled", "forced"),
        "seed": 7,
        "sampling": SamplingParameters(temperature=0.7, max_tokens=2),
    }
    base.update(kwargs)
    return TokenProvenance(**base)


def test_provenance_shapes_follow_the_contract() -> None:
    prov = _prov(template_kwargs={"enable_thinking": True})
    assert prov.input_token_ids == (10, 11, 22, 23)
    assert prov.prompt_token_count == 2
    assert prov.action_mask == (0, 0, 1, 0)
    assert prov.action_tokens() == [
        {"sequence_index": 2, "token_id": 22, "source": "sampled", "behavior_logprob": -0.25},
        {"sequence_index": 3, "token_id": 23, "source": "forced", "behavior_logprob": None},
    ]
    doc = prov.to_dict()
    assert doc["template_invocation"] == {"template_kwargs": {"enable_thinking": True}}
    assert doc["sampling"]["temperature"] == 0.7
    assert doc["seed"] == 7


@pytest.mark.parametrize(
    "bad",
    [
        {"behavior_logprobs": (0.5, None)},
        {"behavior_logprobs": (float("nan"), None)},
        {"behavior_logprobs": (None, None)},
        {"behavior_logprobs": (-0.1, -0.1)},
        {"sources": ("sampled",)},
        {"prompt_token_ids": ()},
        {"completion_token_ids": (22, -1)},
    ],
)
def test_provenance_rejects_inconsistent_data(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - one family of messages
        _prov(**bad)


def test_identity_digest_is_canonical_and_rollout_shape() -> None:
    a = BehaviorPolicyIdentity(kind="openai", name="m", parameters={"b": 1, "a": [2]})
    b = BehaviorPolicyIdentity(kind="openai", name="m", parameters={"a": [2], "b": 1})
    assert a.digest == b.digest
    assert a.digest != BehaviorPolicyIdentity(kind="openai", name="n").digest
    shape = a.rollout_identity()
    assert list(shape) == [
        "served_model_id",
        "base_model_sha256",
        "inference_config_sha256",
        "implementation",
    ]
    assert shape["implementation"] == "kiln-verify/openai"
    with pytest.raises(PolicyConfigInvalid):
        BehaviorPolicyIdentity(kind="", name="x")


# --- scripted -----------------------------------------------------------------------


def test_scripted_list_callable_and_mapping() -> None:
    policy = ScriptedPolicy(['{"arm":0}', '{"arm":1}'])
    assert isinstance(policy, Policy)
    assert asyncio.run(policy.act(_request(1))).text == '{"arm":1}'
    with pytest.raises(PolicyScriptExhausted):
        asyncio.run(policy.act(_request(2)))
    fn = ScriptedPolicy(lambda r: f"step {r.step_index}")
    response = asyncio.run(fn.act(_request(3)))
    assert (response.text, response.latency_ms, response.total_tokens) == ("step 3", 0.0, 0)
    mapped = ScriptedPolicy({"bandit/1": ["c1"], "bandit": ["env"], "*/2": ["any2"], "*": ["x"]})
    assert asyncio.run(mapped.act(_request(0, 1, environment_name="bandit"))).text == "c1"
    assert asyncio.run(mapped.act(_request(0, 0, environment_name="bandit"))).text == "env"
    assert asyncio.run(mapped.act(_request(0, 2, environment_name="maze"))).text == "any2"
    assert asyncio.run(mapped.act(_request(0, 0, environment_name="maze"))).text == "x"


def test_scripted_file_is_strict_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"*": ['{"arm":2}']}))
    policy = build_policy("scripted", {"script": str(path)})
    assert asyncio.run(policy.act(_request())).text == '{"arm":2}'
    assert policy.identity().parameters["script_sha256"].startswith("sha256:")
    path.write_text('{"*": ["a"], "*": ["b"]}')
    with pytest.raises(JsonDuplicateKey):
        ScriptedPolicy.from_file(path)
    path.write_text('{"*": [1]}')
    with pytest.raises(PolicyScriptInvalid):
        ScriptedPolicy.from_file(path)
    path.write_bytes(b"[" + b" " * MAX_POLICY_SCRIPT_BYTES + b"]")
    with pytest.raises(LimitExceeded):
        ScriptedPolicy.from_file(path)


# --- random -------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object"},
        "arm": {"type": "integer", "minimum": 2, "maximum": 5},
        "word": {"type": "string", "minLength": 3, "maxLength": 4},
        "mode": {"enum": ["a", "b"]},
        "fixed": {"const": 7},
        "either": {
            "anyOf": [{"type": "integer", "exclusiveMinimum": 10, "maximum": 12}, {"type": "null"}]
        },
        "ref": {"$ref": "#/$defs/Flag"},
        "note": {"type": "string"},
    },
    "required": ["arm", "word", "mode", "fixed", "either", "ref"],
    "$defs": {"Flag": {"type": "boolean"}},
}


def test_random_actions_are_valid_and_deterministic() -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    seen = set()
    for seed in range(200):
        action = random_action(SCHEMA, None, seed)
        validator.validate(action)
        assert "metadata" not in action
        assert "note" not in action
        assert action == random_action(SCHEMA, None, seed)
        seen.add(action["arm"])
    assert seen == {2, 3, 4, 5}


def test_random_prefers_legal_actions() -> None:
    schema = {
        "type": "object",
        "properties": {"column": {"type": "integer"}},
        "required": ["column"],
    }
    picks = {random_action(schema, {"legal_actions": [1, 4]}, s)["column"] for s in range(50)}
    assert picks == {1, 4}
    assert random_action(schema, {"legal_actions": [{"column": 9}]}, 0) == {"column": 9}
    policy = RandomPolicy()
    a = asyncio.run(
        policy.act(_request(0, 1, action_schema=schema, observation={"legal_actions": [3]}))
    )
    assert a.text == '{"column":3}'
    r1 = asyncio.run(policy.act(_request(0, 1, action_schema=SCHEMA)))
    r2 = asyncio.run(policy.act(_request(0, 1, action_schema=SCHEMA)))
    assert r1.text == r2.text
    assert policy.identity().kind == "random"


# --- registry -----------------------------------------------------------------------


def test_registry_validates_names_and_options() -> None:
    assert parse_policy_options(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    for bad in (["a"], ["=1"], ["a=1", "a=2"]):
        with pytest.raises(PolicyConfigInvalid):
            parse_policy_options(bad)
    assert isinstance(build_policy("random"), RandomPolicy)
    with pytest.raises(PolicyConfigInvalid, match="unknown policy"):
        build_policy("nope")
    with pytest.raises(PolicyConfigInvalid, match="does not take"):
        build_policy("random", {"x": "1"})
    with pytest.raises(PolicyConfigInvalid, match="needs option"):
        build_policy("openai", {"model": "m"})
