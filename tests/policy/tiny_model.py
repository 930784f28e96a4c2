"""Build the tiny random Qwen3.5 model + byte-level BPE tokenizer of ml-stack.md (torch needed)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)


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


def build_tiny_model(directory: Path) -> Path:
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen3_5ForCausalLM, Qwen3_5TextConfig

    tk = train_tokenizer(_corpus())
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.chat_template = CHAT_TEMPLATE
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
