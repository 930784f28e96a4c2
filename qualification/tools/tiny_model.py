"""Build the tiny Qwen3.5 test model (kiln_verify.testing.tiny_model), optionally warm-started.

A random tiny model never emits a valid action, so every rollout candidate would earn the
same invalid-action penalty, every GRPO advantage would be zero and a recorded-GRPO update
could not move the adapter. ``--warm-start CORPUS`` fixes that honestly: a few full-model
steps on (prompt, action) pairs taken from a random-policy rollout corpus (valid actions of
the same environment), so the model then samples varied valid actions with varied rewards.
Seeded and deterministic on CPU.

    python qualification/tools/tiny_model.py --output DIR [--warm-start ROLLOUTS.jsonl]
        [--steps N] [--template plain|thinking]

``--template thinking`` builds the model with the prefix-preserving thinking template
(``THINKING_CHAT_TEMPLATE``), which multi-turn token streams need when thinking is on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kiln_verify.testing.tiny_model import (
    CHAT_TEMPLATE,
    THINKING_CHAT_TEMPLATE,
    build_tiny_model,
    warm_start,
)
from qualification.tools.metrics import emit, fail


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--output", type=Path, required=True, help="model directory to create")
    p.add_argument("--warm-start", type=Path, help="random-policy rollout corpus (JSONL)")
    p.add_argument("--steps", type=int, default=40, help="warm-start optimizer steps")
    p.add_argument("--template", choices=("plain", "thinking"), default="plain")
    args = p.parse_args()
    if args.output.exists():
        return fail(f"{args.output} already exists")
    template = THINKING_CHAT_TEMPLATE if args.template == "thinking" else CHAT_TEMPLATE
    build_tiny_model(args.output, template)
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
