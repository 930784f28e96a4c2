"""Build the tiny Qwen3.5 test model (``tests.policy.tiny_model``) and optionally warm-start it.

A random tiny model never emits a valid action, so every rollout candidate would earn the
same invalid-action penalty, every GRPO advantage would be zero and a recorded-GRPO update
could not move the adapter. ``--warm-start CORPUS`` fixes that honestly: a few full-model
steps on (prompt, action) pairs taken from a random-policy rollout corpus (valid actions of
the same environment), so the model then samples varied valid actions with varied rewards.
Seeded and deterministic on CPU.

    python qualification/tools/tiny_model.py --output DIR [--warm-start ROLLOUTS.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qualification.tools.metrics import emit, fail
from tests.policy.tiny_model import build_tiny_model


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


def warm_start(directory: Path, corpus: Path, steps: int) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    examples = pairs(corpus)
    if not examples:
        raise ValueError(f"{corpus} holds no actions to warm-start from")
    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True)
    batches = []
    for messages, action in examples:
        prompt = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, enable_thinking=False, tokenize=False
        )
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(action + "<|im_end|>", add_special_tokens=False)["input_ids"]
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--output", type=Path, required=True, help="model directory to create")
    p.add_argument("--warm-start", type=Path, help="random-policy rollout corpus (JSONL)")
    p.add_argument("--steps", type=int, default=40, help="warm-start optimizer steps")
    args = p.parse_args()
    if args.output.exists():
        return fail(f"{args.output} already exists")
    build_tiny_model(args.output)
    if args.warm_start is not None:
        try:
            emit(
                "model.warm_start_final_loss",
                round(warm_start(args.output, args.warm_start, args.steps), 6),
            )
        except (OSError, ValueError, KeyError) as error:
            return fail(f"warm start failed: {error}")
        emit("model.warm_start_steps", args.steps)
    emit("model.files", sum(1 for path in args.output.iterdir() if path.is_file()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
