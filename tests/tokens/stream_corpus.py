"""Multi-turn GRPO corpora built by the token-stream rule, without sampling a model.

Each completion is a trajectory of chosen actions and environment turns (a step result, a
recoverable protocol error, a closing harness error); its token stream is assembled turn
by turn with :func:`kiln_verify.tokens.next_turn` through the model directory's own
tokenizer and inference template, exactly as the ``transformers`` policy records one.
With ``thinking`` every action reasons for exactly ``budget`` sampled tokens and then has
``</think>`` forced (the thinking budget's close tokens). Rows are JSON, so tests can
tamper with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kiln_verify.errors import HfGrpoPromptReplayMismatch
from kiln_verify.hf.digests import prompt_messages_digest, scored_payload_digest
from kiln_verify.hf.export import ModelSnapshot
from kiln_verify.tokens import THINK_CLOSE, TokenCodec, chat_message, next_turn
from tests.hf.grpo_corpus import identities

PROMPT = [
    {"role": "system", "content": "walk the maze"},
    {"role": "user", "content": "reset result: start at A"},
]
OBSERVATIONS = (
    'step result: {"moves":1}',
    '{"openenv_error":{"code":"EXECUTION_ERROR","message":"move 7 is out of range"},'
    '"recoverable":true,"done":false}',
)
CLOSING = '{"openenv_harness_error":{"code":"INVALID_MODEL_ACTION","message":"x"},"done":true}'


def codec_of(model: Path) -> TokenCodec:
    snap = ModelSnapshot.read(model)
    return TokenCodec.from_files(
        snap.tokenizer, snap.chat_template, error=HfGrpoPromptReplayMismatch
    )


def _completion(
    codec: TokenCodec,
    actions: list[str],
    *,
    thinking: bool,
    budget: int,
    logprob: float,
    base: dict[str, Any],
) -> dict[str, Any]:
    invocation = {"template_kwargs": {"enable_thinking": thinking}}
    eos = codec.encode("<|im_end|>")
    close = codec.encode(THINK_CLOSE)
    chat = [dict(m) for m in PROMPT]
    text = codec.render(chat, invocation, generation_prompt=True)
    ids = codec.encode(text)
    prompt_count = len(ids)
    trajectory: list[dict[str, Any]] = []
    tokens: list[dict[str, Any]] = []
    for number, action in enumerate(actions):
        body: list[tuple[int, str]] = []
        if thinking:
            reasoning = codec.encode("the answer is")[:budget]
            body += [(t, "sampled") for t in reasoning] + [(t, "forced") for t in close]
        body += [(t, "sampled") for t in codec.encode(action)] + [(t, "sampled") for t in eos]
        action_ids = [t for t, _ in body]
        content = codec.decode(action_ids[:-1])
        for offset, (token, source) in enumerate(body):
            tokens.append(
                {
                    "sequence_index": len(ids) + offset,
                    "token_id": token,
                    "source": source,
                    "behavior_logprob": logprob - 0.125 * offset if source == "sampled" else None,
                }
            )
        trajectory.append({"role": "assistant", "content": content, "kind": "action"})
        last = number == len(actions) - 1
        observation = CLOSING if last else OBSERVATIONS[number % len(OBSERVATIONS)]
        segment: dict[str, Any] = {"role": "tool", "content": observation, "kind": "observation"}
        if observation.startswith('{"openenv_'):
            segment["warning_prefix_len"] = len(observation.encode("utf-8"))
        if last:
            ids += action_ids
            trajectory.append(segment)
            break
        next_chat = chat + [chat_message(s["role"], s["content"]) for s in [*trajectory, segment]]
        text, env = next_turn(
            codec,
            invocation,
            turn_text=text,
            action_ids=action_ids,
            content=content,
            next_chat=next_chat,
            where="builder",
        )
        ids += action_ids + env
        trajectory.append(segment)
    joined = "<TURN_BREAK>".join(s["content"] for s in trajectory if s["kind"] == "action")
    sampling = dict(base["sampling"])
    if thinking:
        sampling["thinking_budget"] = {"max_tokens": budget, "close_token_ids": close}
    provenance = {
        "schema": "kiln.rollout-provenance.v1",
        "input_token_ids": ids,
        "prompt_token_count": prompt_count,
        "prompt_messages_sha256": str(prompt_messages_digest(PROMPT)),
        "scored_payload_sha256": str(scored_payload_digest(joined, trajectory)),
        "action_tokens": tokens,
        "behavior_policy": base["behavior_policy"],
        "tokenizer": base["tokenizer"],
        "template_invocation": invocation,
        "sampling": sampling,
        "seed": 7,
        "generation_backend": "cpu",
    }
    return {"text": joined, "reward": -1.0 + logprob, "trajectory": trajectory,
            "provenance": provenance}  # fmt: skip


def stream_groups(
    model: Path, count: int = 2, *, thinking: bool = False, budget: int = 2
) -> list[dict[str, Any]]:
    """``count`` groups of two multi-turn completions (3 and 2 actions)."""
    codec = codec_of(model)
    policy, tokenizer = identities(model)
    base = {
        "behavior_policy": policy,
        "tokenizer": tokenizer,
        "sampling": {
            "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "max_tokens": 32,
            "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
            "stop": [],
        },
    }  # fmt: skip
    groups = []
    for index in range(count):
        completions = [
            _completion(
                codec,
                ['{"move":1}', f'{{"move":{index + 7}}}', '{"move":2}'],
                thinking=thinking,
                budget=budget,
                logprob=-0.5,
                base=base,
            ),
            _completion(
                codec,
                [f'{{"move":{index}}}', "not json"],
                thinking=thinking,
                budget=budget,
                logprob=-0.25,
                base=base,
            ),
        ]
        groups.append({"messages": PROMPT, "completions": completions})
    return groups
