"""GRPO corpora whose tokens really come from a model directory's tokenizer and template.

``synthetic_groups`` tokenizes chosen texts with ``transformers`` (the recording path of
the ``transformers`` policy: ``apply_chat_template`` then the tokenizer without special
tokens), so export-time and ``hf verify`` token replay accept them. ``recorded_groups``
runs the real :class:`~kiln_verify.openenv.policy.transformers_policy.TransformersPolicy`
and converts each generation with :func:`kiln_verify.hf.manifest.grpo.rollout_provenance`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.hf.export import ModelSnapshot
from kiln_verify.hf.manifest import GrpoGroup, grpo_row_bytes
from kiln_verify.hf.manifest.grpo import TokenizerIdentity, rollout_provenance
from kiln_verify.openenv.policy.base import PolicyRequest
from kiln_verify.records import BehaviorPolicyIdentity

PROMPTS = (
    [{"role": "user", "content": "pull the arm"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the answer"}],
)
TEXTS = (("the answer is four", 1.0), ("pull", -0.5))


def identities(
    model: Path, adapter: dict[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """(behaviour policy, tokenizer identity) a corpus for ``model`` must carry."""
    snap = ModelSnapshot.read(model)
    policy: dict[str, Any] = {
        "served_model_id": snap.served_model_id,
        "base_model_sha256": snap.shards.aggregate_sha256,
        "inference_config_sha256": str(sha256_bytes(b"inference")),
        "implementation": "kiln-test/cpu",
    }
    if adapter is not None:
        policy["adapter"] = dict(adapter)
    tokenizer = {
        "vocab_sha256": str(snap.vocab_sha256),
        "config_sha256": str(sha256_bytes(snap.tokenizer)),
        "chat_template_sha256": str(sha256_bytes(snap.chat_template)),
    }
    return policy, tokenizer


def _sampling(thinking_close: list[int] | None, budget: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 20,
        "min_p": 0.0,
        "max_tokens": 64,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "stop": [],
    }
    if thinking_close:
        out["thinking_budget"] = {"max_tokens": budget, "close_token_ids": thinking_close}
    return out


def synthetic_groups(
    model: Path, count: int = 2, *, adapter: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """``count`` groups of two completions; odd groups think, closing ``</think>`` with
    forced tokens once the budget (the length of the sampled reasoning) ran out. Built as
    JSON (not through the models) so tests can mutate them."""
    from transformers import AutoTokenizer

    from kiln_verify.hf.digests import prompt_messages_digest, scored_payload_digest

    tok: Any = AutoTokenizer.from_pretrained(model, local_files_only=True)
    policy, tokenizer = identities(model, adapter)
    eos = int(tok.eos_token_id)

    def encode(text: str) -> list[int]:
        return [int(i) for i in tok(text, add_special_tokens=False)["input_ids"]]

    groups = []
    for index in range(count):
        messages = PROMPTS[index % len(PROMPTS)]
        thinking = index % 2 == 1
        rendered = tok.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, enable_thinking=thinking
        )
        prompt = encode(rendered)
        close = encode("</think>") if thinking else []
        completions = []
        for number, (text, reward) in enumerate(TEXTS):
            actions: list[dict[str, Any]] = []
            body: list[tuple[int, str]] = []
            if thinking:
                body += [(t, "sampled") for t in encode("arm")] + [(t, "forced") for t in close]
            body += [(t, "sampled") for t in encode(text)] + [(eos, "sampled")]
            for offset, (token, source) in enumerate(body):
                actions.append(
                    {
                        "sequence_index": len(prompt) + offset,
                        "token_id": token,
                        "source": source,
                        "behavior_logprob": -0.25 - 0.125 * number if source == "sampled" else None,
                    }
                )
            completions.append(
                {
                    "text": text,
                    "reward": reward - 0.25 * index,
                    "provenance": {
                        "schema": "kiln.rollout-provenance.v1",
                        "input_token_ids": prompt + [t for t, _ in body],
                        "prompt_token_count": len(prompt),
                        "prompt_messages_sha256": str(prompt_messages_digest(messages)),
                        "scored_payload_sha256": str(scored_payload_digest(text, [])),
                        "action_tokens": actions,
                        "behavior_policy": dict(policy),
                        "tokenizer": dict(tokenizer),
                        "template_invocation": {"template_kwargs": {"enable_thinking": thinking}},
                        "sampling": _sampling(close, len(encode("arm"))),
                        "seed": 7 + number,
                        "generation_backend": "cpu",
                    },
                }
            )
        groups.append({"messages": messages, "completions": completions})
    return groups


def write_groups(path: Path, groups: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(grpo_row_bytes(GrpoGroup.model_validate(g)) for g in groups))
    return path


def recorded_groups(
    model: Path,
    *,
    groups: int = 2,
    width: int = 2,
    seed: int = 11,
    max_tokens: int = 6,
    adapter: dict[str, str] | None = None,
) -> list[GrpoGroup]:
    """Groups sampled by the real ``transformers`` policy and converted with
    ``rollout_provenance``; reward 1.0 for the first candidate, the rest -1.0 so each
    group has a non-zero advantage."""
    from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy

    policy_obj = TransformersPolicy(model, name="tiny")
    policy_json, tokenizer_json = identities(model, adapter)
    behaviour = BehaviorPolicyIdentity.model_validate(policy_json)
    tokenizer = TokenizerIdentity.model_validate(tokenizer_json)
    out = []
    for index in range(groups):
        messages = PROMPTS[index % len(PROMPTS)]
        completions = []
        for candidate in range(width):
            request = PolicyRequest.for_step(
                messages=messages,
                action_schema=None,
                seed=seed + index,
                candidate_index=candidate,
                step_index=0,
                temperature=1.0,
                max_action_tokens=max_tokens,
                thinking=False,
            )
            response = asyncio.run(policy_obj.act(request))
            assert response.provenance is not None
            provenance = rollout_provenance(
                response.provenance,
                messages=messages,
                text=response.text,
                behavior_policy=behaviour,
                tokenizer=tokenizer,
            )
            completions.append(
                {
                    "text": response.text,
                    "reward": 1.0 if candidate == 0 else -1.0,
                    "provenance": provenance.to_json(),
                }
            )
        out.append(GrpoGroup.model_validate({"messages": messages, "completions": completions}))
    return out
