"""Every rule ``train.py`` duplicates from the library, pinned to the library's own value.

The runner is embedded byte for byte in each export and cannot import kiln-verify, so it
carries copies: the LoRA target list, the limits (the chat-template cap among them), strict
JSON, the rollout-provenance and thinking text, the template arguments a render owns, the
training template's generation tags. Each copy is compared with its single source of truth
here, so changing one side without the other fails a test. (The token-stream rule itself
is compared by behaviour in ``test_stream.py``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln_verify import limits
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import KilnError
from kiln_verify.hf.adapter_check import LORA_TARGETS
from kiln_verify.hf.export import template
from kiln_verify.hf.manifest.grpo import MIN_GROUP_COMPLETIONS, ROLLOUT_PROVENANCE
from kiln_verify.hf.runner import train
from kiln_verify.records import MAX_LOGPROB
from kiln_verify.tokens import THINK_CLOSE
from kiln_verify.tokens.codec import RESERVED_TEMPLATE_ARGUMENTS


def test_lora_targets() -> None:
    assert train.LORA_TARGETS == LORA_TARGETS


@pytest.mark.parametrize(
    ("runner", "library"),
    [
        ("MAX_MANIFEST_BYTES", "MAX_MANIFEST_BYTES"),
        ("MAX_RECEIPT_BYTES", "MAX_SFT_RECEIPT_BYTES"),
        ("MAX_TOKENIZER_BYTES", "MAX_TOKENIZER_BYTES"),
        ("MAX_TEMPLATE_BYTES", "MAX_CHAT_TEMPLATE_BYTES"),
        ("MAX_PATH_BYTES", "MAX_ARTIFACT_PATH_BYTES"),
        ("MAX_TEXT_BYTES", "MAX_HF_TEXT_BYTES"),
        ("MAX_SHARDS", "MAX_BASE_SHARDS"),
        ("MAX_GRPO_DATASET_BYTES", "MAX_GRPO_DATASET_BYTES"),
        ("MAX_GRPO_ROW_BYTES", "MAX_GRPO_ROW_BYTES"),
        ("MAX_GRPO_GROUPS", "MAX_GRPO_GROUPS"),
        ("MAX_COMPLETIONS", "MAX_GROUP_COMPLETIONS"),
        ("MAX_CONFIG_ENTRIES", "MAX_EFFECTIVE_CONFIG_ENTRIES"),
        ("MAX_CONFIG_BYTES", "MAX_EFFECTIVE_CONFIG_BYTES"),
        ("MAX_LORA_RANK", "MAX_LORA_RANK"),
    ],
)
def test_limits(runner: str, library: str) -> None:
    assert getattr(train, runner) == getattr(limits, library)


def test_grpo_constants() -> None:
    assert train.MIN_COMPLETIONS == MIN_GROUP_COMPLETIONS
    assert train.ROLLOUT_SCHEMA == ROLLOUT_PROVENANCE
    assert train.THINK_CLOSE == THINK_CLOSE
    assert train.RESERVED_TEMPLATE_ARGUMENTS == RESERVED_TEMPLATE_ARGUMENTS
    assert MAX_LOGPROB == 1e-6  # the runner's literal bound in check_action_tokens
    assert "logprob > 1e-6" in Path(train.__file__).read_text(encoding="utf-8")


def test_generation_tags() -> None:
    # the runner reads the template as bytes, the library as text: same patterns
    assert train.GENERATION_OPEN.pattern == template.GENERATION_OPEN.pattern.encode()
    assert train.GENERATION_CLOSE.pattern == template.GENERATION_CLOSE.pattern.encode()


BAD_JSON = [b'{"a":1,"a":2}', b'{"a":NaN}', b'{"a":Infinity}', b'{"a":1} x', b"[1,]"]


@pytest.mark.parametrize("data", [*BAD_JSON, b'{"a":"\\ud800"}'])
def test_strict_json_refuses_what_the_library_refuses(data: bytes) -> None:
    with pytest.raises(KilnError):
        loads(data, max_bytes=1024)
    with pytest.raises(train.ContractError):
        train.strict_json(data, "probe")


@pytest.mark.parametrize("data", [b'{"a":-0}', b'{"a":[1,2.5,"x",null,true]}', b'{"b":{"c":{}}}'])
def test_strict_json_accepts_what_the_library_accepts(data: bytes) -> None:
    assert train.strict_json(data, "probe") == loads(data, max_bytes=1024)
