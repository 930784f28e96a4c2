"""Metrics of a multi-turn GRPO corpus written by ``rollout --grpo-output``.

Counts what the multi-turn qualification case must show: groups and rollouts, model
steps per episode (the longest), recoverable protocol errors the episodes continued
after, and the token stream's positions by kind (prompt, sampled, forced, environment).
Standard library only.

    python qualification/tools/stream_figures.py --input GRPO.jsonl --prefix mt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qualification.tools.metrics import emit, fail


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--prefix", required=True)
    args = p.parse_args()
    counts = dict.fromkeys(
        ("groups", "rollouts", "steps", "recoverable_errors", "prompt_tokens",
         "sampled_tokens", "forced_tokens", "environment_tokens"), 0)  # fmt: skip
    longest = 0
    try:
        lines = args.input.read_bytes().splitlines()
    except OSError as error:
        return fail(f"cannot read {args.input}: {error}")
    for line in lines:
        group = json.loads(line)
        counts["groups"] += 1
        for completion in group["completions"]:
            counts["rollouts"] += 1
            trajectory = completion.get("trajectory") or []
            steps = sum(segment["kind"] == "action" for segment in trajectory)
            counts["steps"] += steps
            longest = max(longest, steps)
            counts["recoverable_errors"] += sum(
                '"recoverable":true' in segment["content"] for segment in trajectory
            )
            provenance = completion["provenance"]
            actions = provenance["action_tokens"]
            sampled = sum(action["source"] == "sampled" for action in actions)
            counts["sampled_tokens"] += sampled
            counts["forced_tokens"] += len(actions) - sampled
            prompt = provenance["prompt_token_count"]
            counts["prompt_tokens"] += prompt
            counts["environment_tokens"] += (
                len(provenance["input_token_ids"]) - prompt - len(actions)
            )
    for name, value in counts.items():
        emit(f"{args.prefix}.{name}", value, "count")
    emit(f"{args.prefix}.max_steps", longest, "count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
