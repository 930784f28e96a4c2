"""The tiny model recipe (kiln_verify.testing.tiny_model) every ML test builds on.

Sharing one built directory between tests and workers is only sound if the same inputs
give the same bytes; and a test
that reads ``<|im_end|>`` or ``</think>`` through this tokenizer relies on the recipe's
special tokens and ids, which nothing else pins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from kiln_verify.testing.tiny_model import (
    CHAT_TEMPLATE,
    THINKING_CHAT_TEMPLATE,
    build_tiny_model,
    train_tokenizer,
)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
FILES = {
    "chat_template.jinja",
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
}


def test_the_tokenizer_is_byte_level_with_the_chat_specials_first() -> None:
    corpus = [f'{{"arm": {i}}} pull the arm </think> <think>' for i in range(50)]
    tokenizer = train_tokenizer(corpus)
    assert [tokenizer.token_to_id(token) for token in SPECIALS] == [0, 1, 2]
    assert tokenizer.get_vocab_size() <= 384
    # byte level: any text, even outside the corpus, round-trips
    for text in ('{"arm": 3}', "ünïcode ✓ \t\n", "</think>"):
        assert tokenizer.decode(tokenizer.encode(text).ids) == text
    assert train_tokenizer(corpus).to_str() == tokenizer.to_str()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("recipe")
    return (
        build_tiny_model(root / "first", THINKING_CHAT_TEMPLATE),
        build_tiny_model(root / "second", THINKING_CHAT_TEMPLATE),
    )


def test_the_same_inputs_give_the_same_bytes(built: tuple[Path, Path]) -> None:
    first, second = built
    assert {path.name for path in first.iterdir()} == FILES
    for name in sorted(FILES):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_the_directory_loads_with_its_template_and_special_ids(built: tuple[Path, Path]) -> None:
    from transformers import AutoConfig, AutoTokenizer

    model, _ = built
    assert (model / "chat_template.jinja").read_text(encoding="utf-8") == THINKING_CHAT_TEMPLATE
    assert THINKING_CHAT_TEMPLATE != CHAT_TEMPLATE
    tokenizer = AutoTokenizer.from_pretrained(model)
    config = AutoConfig.from_pretrained(model)
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.eos_token_id == config.eos_token_id == 2
    assert tokenizer.pad_token_id == config.pad_token_id == 0
    assert config.vocab_size == 384
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "pull"}],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=True,
    )
    assert rendered == "<|im_start|>user\npull<|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert json.loads((model / "config.json").read_text())["layer_types"] == [
        "linear_attention",
        "full_attention",
    ]
