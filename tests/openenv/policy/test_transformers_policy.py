"""The transformers policy on the tiny random Qwen3.5 model (needs the train extra)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from kiln_verify.openenv.policy.base import ZERO_CLOCK, PolicyRequest, PolicyResponse
from kiln_verify.openenv.policy.registry import build_policy
from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy
from kiln_verify.records import TokenProvenance
from tests import models

MESSAGES = [{"role": "system", "content": "act"}, {"role": "user", "content": "pick an arm"}]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="session")
def policy(tiny_model: Path) -> TransformersPolicy:
    return TransformersPolicy(tiny_model, clock=ZERO_CLOCK)


def _act(
    policy: TransformersPolicy,
    seed: int,
    *,
    tokens: int = 12,
    thinking: bool = False,
    temperature: float = 1.0,
) -> PolicyResponse:
    request = PolicyRequest(
        messages=MESSAGES,
        action_schema={},
        generation_seed=seed,
        max_action_tokens=tokens,
        thinking=thinking,
        temperature=temperature,
    )
    return asyncio.run(policy.act(request))


def _prov(response: PolicyResponse) -> TokenProvenance:
    assert response.provenance is not None
    return response.provenance


def test_same_seed_same_tokens_and_logprobs(policy: TransformersPolicy) -> None:
    a, b = _act(policy, 11), _act(policy, 11)
    assert a == b
    c = _act(policy, 12)
    assert _prov(a).completion_token_ids != _prov(c).completion_token_ids


def test_provenance_is_consistent(policy: TransformersPolicy) -> None:
    import torch

    r = _act(policy, 5, tokens=8)
    prov = _prov(r)
    assert prov.seed == 5
    n = len(prov.completion_token_ids)
    assert 1 <= n <= 8
    assert r.completion_tokens == n
    assert r.prompt_tokens == prov.prompt_token_count
    assert len(prov.behavior_logprobs) == n
    assert set(prov.sources) == {"sampled"}
    assert all(lp is not None and lp <= 0 for lp in prov.behavior_logprobs)
    assert r.latency_ms == 0.0
    tokens = prov.action_tokens()
    positions = [t["sequence_index"] for t in tokens]
    assert positions == list(range(prov.prompt_token_count, len(prov.input_token_ids)))
    # Recompute every behaviour log-prob with one full forward pass (no cache).
    model = policy._model
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([list(prov.input_token_ids)])).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    for t in tokens:
        expected = float(logp[t["sequence_index"] - 1, t["token_id"]])
        assert t["behavior_logprob"] == pytest.approx(expected, abs=1e-4)


def test_thinking_flag_reaches_the_template(policy: TransformersPolicy) -> None:
    off = _act(policy, 3, tokens=4)
    on = _act(policy, 3, tokens=4, thinking=True)
    p_off, p_on = _prov(off), _prov(on)
    assert p_on.prompt_token_ids[: len(p_off.prompt_token_ids)] == p_off.prompt_token_ids
    assert len(p_on.prompt_token_ids) > len(p_off.prompt_token_ids)
    assert p_on.template_kwargs == {"enable_thinking": True}
    assert on.reasoning is not None


def test_greedy_and_identity(policy: TransformersPolicy, tiny_model: Path) -> None:
    g1, g2 = _act(policy, 1, temperature=0.0), _act(policy, 2, temperature=0.0)
    assert _prov(g1).completion_token_ids == _prov(g2).completion_token_ids
    identity = policy.identity()
    assert identity.kind == "transformers"
    assert identity.model_sha256 is not None
    rebuilt = build_policy("transformers", {"model_dir": str(tiny_model)})
    assert rebuilt.identity().digest == identity.digest
