"""``adapter_dir``: a PEFT LoRA adapter on the tiny model changes outputs and identity."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from kiln_verify.core.digest import hash_file
from kiln_verify.errors import KilnError
from kiln_verify.hf.digests import adapter_content_revision
from kiln_verify.openenv.policy.base import ZERO_CLOCK, PolicyRequest
from kiln_verify.openenv.policy.registry import build_policy
from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy
from kiln_verify.records import TokenProvenance
from kiln_verify.testing.lora import build_lora_adapter
from tests import models

MESSAGES = [{"role": "system", "content": "act"}, {"role": "user", "content": "pick an arm"}]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_lora_adapter(tiny_model, tmp_path_factory.mktemp("adapters") / "lora-a")


@pytest.fixture(scope="module")
def base(tiny_model: Path) -> TransformersPolicy:
    return TransformersPolicy(tiny_model, clock=ZERO_CLOCK)


@pytest.fixture(scope="module")
def tuned(tiny_model: Path, adapter: Path) -> TransformersPolicy:
    return TransformersPolicy(tiny_model, adapter_dir=adapter, clock=ZERO_CLOCK)


def _prov(policy: TransformersPolicy, seed: int, tokens: int = 10) -> TokenProvenance:
    request = PolicyRequest(
        messages=MESSAGES,
        action_schema={},
        generation_seed=seed,
        max_action_tokens=tokens,
        thinking=False,
    )
    response = asyncio.run(policy.act(request))
    assert response.provenance is not None
    return response.provenance


def test_adapter_changes_logprobs_and_is_reproducible(
    base: TransformersPolicy, tuned: TransformersPolicy
) -> None:
    import torch

    plain, adapted = _prov(base, 5), _prov(tuned, 5)
    assert plain.prompt_token_ids == adapted.prompt_token_ids
    assert plain.behavior_logprobs != adapted.behavior_logprobs
    assert _prov(tuned, 5) == adapted  # same seed, same tokens and log-probs
    # The recorded log-probs are the adapted model's: recompute them in one full pass.
    with torch.no_grad():
        logits = tuned._model(input_ids=torch.tensor([list(adapted.input_token_ids)])).logits[0]
        base_logits = base._model(input_ids=torch.tensor([list(adapted.input_token_ids)])).logits
    logp = torch.log_softmax(logits.float(), dim=-1)
    for token in adapted.action_tokens():
        expected = float(logp[token["sequence_index"] - 1, token["token_id"]])
        assert token["behavior_logprob"] == pytest.approx(expected, abs=1e-4)
    assert not torch.allclose(logits, base_logits[0])
    assert not tuned._model.training


def test_identity_binds_the_adapter(
    base: TransformersPolicy, tuned: TransformersPolicy, tiny_model: Path, adapter: Path
) -> None:
    plain, adapted = base.identity(), tuned.identity()
    assert plain.adapter is None
    assert plain.model_sha256 == adapted.model_sha256
    weights = hash_file(adapter / "adapter_model.safetensors", max_bytes=1 << 30)
    config = hash_file(adapter / "adapter_config.json", max_bytes=1 << 20)
    revision = adapter_content_revision(weights.sha256, weights.size_bytes, config.sha256)
    assert adapted.adapter == {"name": "lora-a", "content_sha256": "sha256:" + revision}
    assert plain.digest != adapted.digest
    assert "adapter" not in plain.rollout_identity()
    assert adapted.rollout_identity()["adapter"] == adapted.adapter
    assert list(adapted.rollout_identity()) == [
        "served_model_id",
        "base_model_sha256",
        "adapter",
        "inference_config_sha256",
        "implementation",
    ]
    rebuilt = build_policy(
        "transformers", {"model_dir": str(tiny_model), "adapter_dir": str(adapter)}
    )
    assert rebuilt.identity().digest == adapted.digest  # deterministic across builds


def test_other_adapter_bytes_other_identity(
    tiny_model: Path, adapter: Path, tmp_path: Path, tuned: TransformersPolicy
) -> None:
    other = build_lora_adapter(tiny_model, tmp_path / "lora-a", seed=8)
    policy = TransformersPolicy(tiny_model, adapter_dir=other, clock=ZERO_CLOCK)
    assert policy.identity().adapter != tuned.identity().adapter
    assert policy.identity().digest != tuned.identity().digest


def _code(call: Callable[[], object]) -> str:
    with pytest.raises(KilnError) as caught:
        call()
    return caught.value.code


def test_adapter_refusals(tiny_model: Path, adapter: Path, tmp_path: Path) -> None:
    def build(directory: Path) -> Callable[[], object]:
        return lambda: build_policy(
            "transformers", {"model_dir": str(tiny_model), "adapter_dir": str(directory)}
        )

    assert _code(build(tmp_path / "absent")) == "path_missing"
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    shutil.copy(adapter / "adapter_config.json", no_weights)
    assert _code(build(no_weights)) == "path_missing"
    wrong = tmp_path / "wrong-targets"
    shutil.copytree(adapter, wrong)
    config = json.loads((wrong / "adapter_config.json").read_text())
    config["target_modules"] = ["no_such_module"]
    (wrong / "adapter_config.json").write_text(json.dumps(config))
    assert _code(build(wrong)) == "policy_adapter_invalid"
    garbage = tmp_path / "garbage"
    shutil.copytree(adapter, garbage)
    (garbage / "adapter_model.safetensors").write_bytes(b"not safetensors")
    assert _code(build(garbage)) == "policy_adapter_invalid"


def test_device_option(tiny_model: Path) -> None:
    import torch

    def build(device: str) -> Callable[[], object]:
        options = {"model_dir": str(tiny_model), "device": device}
        return lambda: build_policy("transformers", options)

    assert _code(build("tpu")) == "policy_config_invalid"
    assert _code(build("cuda:x")) == "policy_config_invalid"
    if not torch.cuda.is_available():
        assert _code(build("cuda")) == "policy_unavailable"
        assert _code(build("cuda:0")) == "policy_unavailable"
