"""A tiny tool-calling model for TRL's ``environment_factory`` path, built offline.

TRL's tool loop needs a chat template that renders a whole tool-calling conversation
(``user -> assistant with tool_calls -> tool``), is prefix-preserving (it splices tool-result
tokens between generations) and a response parser for the model's tool calls. The tiny
test model's ChatML template renders no tools, so this module builds its own, locally, like
the tiny tokenizer: :data:`TOOL_CHAT_TEMPLATE` is ChatML with the tools' JSON schemas in
the system turn (keys sorted: a recorded ``tools`` list is canonical JSON, so a template
whose rendering depends on key order could not be replayed), assistant tool calls in the
Hermes ``<tool_call>{"name", "arguments"}</tool_call>`` form, tool results as ``tool``
turns and every assistant reply in a ``{% generation %}`` block (so it is also its own
training template), and the tokenizer carries TRL's own Qwen3 response template, which
parses exactly that form. The template renders an assistant turn
as ``content`` + its tool calls + ``<|im_end|>``, so a turn recorded as its raw sampled
text re-renders byte for byte (kiln-verify's token-stream rule, docs/hf-contract.md).

:func:`warm_start_tool_model` teaches the random model to call the counter oracle's
``step`` tool (amount 2 mostly, sometimes 1, sometimes an amount the server refuses, and a
plain "done" once the episode ended), so a few CPU steps of GRPO see multi-turn episodes,
recoverable protocol errors and reward variance. torch, transformers and tokenizers are
imported inside the functions.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

__all__ = ["TOOL_CHAT_TEMPLATE", "build_tool_model", "counter_episode", "warm_start_tool_model"]

TOOL_CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0]['role'] == 'system' -%}{{- messages[0]['content'] + '\\n' -}}{%- endif -%}"
    "{%- for tool in tools -%}{{- (tool | tojson(sort_keys=True)) + '\\n' -}}{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif messages[0]['role'] == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and loop.first -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- generation -%}"
    "{{- message['content'] -}}"
    "{%- if message.tool_calls -%}{%- for call in message.tool_calls -%}"
    "{{- '<tool_call>\\n' + ({'name': call.function.name, 'arguments': call.function.arguments}"
    " | tojson) + '\\n</tool_call>' -}}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>' -}}"
    "{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

_HEAD = "OpenEnv {label} (observation, reward, done, and optional metadata JSON):\n"


def _observation(label: str, total: int, reward: str, done: bool) -> str:
    body = (
        f'{{"observation":{{"last_note":null,"metadata":{{}},"target":4,"total":{total}}},'
        f'"reward":{reward},"done":{"true" if done else "false"}}}'
    )
    return _HEAD.format(label=label) + body


def _call(amount: int) -> str:
    arguments = json.dumps({"name": "step", "arguments": {"amount": amount}})
    return f"<tool_call>\n{arguments}\n</tool_call>"


def counter_episode(rng: random.Random) -> list[dict[str, Any]]:
    """One scripted counter episode as chat messages (the texts the oracle and the factory
    produce): tool calls until the total reaches 4, then a plain ``done``."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": _observation("reset result", 0, "null", False)}
    ]
    total = 0
    while total < 4:
        amount = rng.choice((2, 2, 2, 1, 2_000_000))
        messages.append({"role": "assistant", "content": _call(amount)})
        if amount > 1_000_000:
            error = (
                '{"openenv_error":{"code":"EXECUTION_ERROR","message":"amount must be between '
                '-1000000 and 1000000"},"recoverable":true,"done":false}'
            )
            messages.append({"role": "tool", "content": error})
            continue
        total += amount
        done = total >= 4
        messages.append(
            {"role": "tool", "content": _observation("step result", total, f"{total}.0", done)}
        )
    messages.append({"role": "assistant", "content": "done"})
    return messages


def _tokenizer_corpus(tools: list[dict[str, Any]]) -> list[str]:
    rng = random.Random(0)
    lines = []
    for _ in range(120):
        for message in counter_episode(rng):
            lines.append(message["content"])
        lines.extend(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return lines


def build_tool_model(directory: Path, tools: list[dict[str, Any]]) -> Path:
    """A tiny Qwen3 model (full attention only: no pure-PyTorch fallback kernels, so CPU
    generation is fast) with a 512-token BPE trained on counter episodes, the tool
    template and TRL's Qwen3 response parser; random weights (seed 0). The tokenizer is
    also trained on ``tools`` (the JSON schemas the template writes into the system turn),
    so prompts stay short."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    from trl.chat_template_utils import qwen3_template

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        min_frequency=2,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator(_tokenizer_corpus(tools), trainer=trainer)
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tk,
        eos_token="<|im_end|>",  # noqa: S106
        pad_token="<|endoftext|>",  # noqa: S106
    )
    tok.chat_template = TOOL_CHAT_TEMPLATE
    tok.response_template = qwen3_template
    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        eos_token_id=2,
        pad_token_id=0,
        bos_token_id=None,
    )
    directory.mkdir(parents=True, exist_ok=True)
    Qwen3ForCausalLM(cfg).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def warm_start_tool_model(
    directory: Path, tools: list[dict[str, Any]], *, steps: int = 80, episodes: int = 24
) -> float:
    """Teach the model the scripted counter episodes (assistant tokens only, seeded AdamW);
    ``tools`` are the JSON schemas the factory exposes. Returns the last loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True)
    rng = random.Random(1)
    batches = []
    for _ in range(episodes):
        rendered: Any = tokenizer.apply_chat_template(
            counter_episode(rng),
            tools=list[Any](tools),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        ids = list(rendered["input_ids"])
        mask = list(rendered["assistant_masks"])
        labels = [token if keep else -100 for token, keep in zip(ids, mask, strict=True)]
        batches.append((torch.tensor([ids]), torch.tensor([labels])))
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        inputs, targets = batches[step % len(batches)]
        loss = model(input_ids=inputs, labels=targets).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_value = float(loss.detach())
    model.eval()  # type: ignore[no-untyped-call]
    model.save_pretrained(directory)
    return loss_value
