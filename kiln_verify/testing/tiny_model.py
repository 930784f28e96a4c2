"""The tiny random Qwen3.5 model and byte-level BPE tokenizer every ML test builds.

No model or tokenizer can be downloaded where the suite runs, so tests, benchmarks and
qualification workloads build the same tiny model from scratch (ml-stack.md's recipe):
a 384-token byte-level BPE trained in milliseconds on a fixed corpus, and a two-layer
Qwen3.5 (one linear-attention, one full-attention layer) with seeded random weights.
:func:`warm_start` teaches it to emit valid actions: a random model never does, so every
candidate would earn the same penalty and no GRPO advantage would be non-zero.

torch, transformers and tokenizers (the ``train`` extra) are imported inside the
functions, so importing this module costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "THINKING_CHAT_TEMPLATE",
    "build_tiny_model",
    "pairs",
    "train_tokenizer",
    "warm_start",
]

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)
"""ChatML. With ``enable_thinking`` the generation prompt opens ``<think>`` but earlier
assistant turns are rendered without it, so multi-turn thinking is *not* prefix-preserving
(docs/hf-contract.md): recording such a trajectory is refused."""

THINKING_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- generation -%}{{- message['content'] + '<|im_end|>' -}}{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)
"""ChatML whose assistant history keeps the ``<think>`` opener the generation prompt wrote
(the reasoning stays in the recorded content), so multi-turn thinking is prefix-preserving.
Assistant replies sit in ``{% generation %}`` blocks, so it is also its own TRL template."""


def _corpus() -> list[str]:
    words = ["arm", "pull", "reward", "action", "observation", "the", "answer", "is", "four"]
    lines = []
    for i in range(300):
        a, b = words[i % len(words)], words[(i * 7) % len(words)]
        lines.append(f'{{"arm": {i % 10}, "{a}": "{b}"}} {a} {b} </think> <think>')
    return lines


def train_tokenizer(corpus: Iterable[str]) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` (vocabulary 384, the three chat specials)
    trained on ``corpus`` in milliseconds: no tokenizer can be downloaded here."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        min_frequency=2,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator(list(corpus), trainer=trainer)
    return tk


def build_tiny_model(directory: Path, chat_template: str = CHAT_TEMPLATE) -> Path:
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen3_5ForCausalLM, Qwen3_5TextConfig

    tk = train_tokenizer(_corpus())
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>"  # noqa: S106
    )
    tok.chat_template = chat_template
    torch.manual_seed(0)
    cfg = Qwen3_5TextConfig(
        vocab_size=384,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        eos_token_id=2,
        pad_token_id=0,
        bos_token_id=None,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "full_attention"],
    )
    model = Qwen3_5ForCausalLM(cfg)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def pairs(corpus: Path) -> list[tuple[list[dict[str, Any]], str]]:
    """(chat messages, first action text) per candidate of every rollout group."""
    found = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        group = json.loads(line)
        for completion in group["completions"]:
            actions = [t["content"] for t in completion["trajectory"] if t["kind"] == "action"]
            if actions and actions[0].strip():
                found.append((group["messages"], actions[0].split("</think>")[-1].strip()))
    return found


def warm_start(directory: Path, corpus: Path, steps: int, *, thinking: bool = False) -> float:
    """Teach the tiny model the actions of ``corpus`` for ``steps`` seeded AdamW steps.

    With ``thinking`` each example is also shown in thinking form (generation prompt with
    ``<think>``, a short reasoning closed by ``</think>``, then the action), alternating
    with the plain form, so a thinking rollout can still produce actions.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    examples = pairs(corpus)
    if not examples:
        raise ValueError(f"{corpus} holds no actions to warm-start from")
    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True)
    batches = []
    for messages, action in examples:
        for think in (False, True) if thinking else (False,):
            prompt = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, enable_thinking=think, tokenize=False
            )
            prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            answer = ("the answer</think>" if think else "") + action + "<|im_end|>"
            answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([prompt_ids + answer_ids])
            labels = torch.tensor([[-100] * len(prompt_ids) + answer_ids])
            batches.append((ids, labels))
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        ids, labels = batches[step % len(batches)]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_value = float(loss.detach())
    model.eval()  # type: ignore[no-untyped-call]
    model.save_pretrained(directory)
    return loss_value
