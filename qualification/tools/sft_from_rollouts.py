"""Derive an SFT messages file from a rollout corpus: the best candidate of every group.

Per group (one JSONL row), the candidate with the highest reward (the lowest index on ties)
contributes ``{"messages": [...the group's chat..., {"role": "assistant", "content": its
first action}]}``; a candidate whose first action is empty is passed over.

    python qualification/tools/sft_from_rollouts.py --rollouts R.jsonl --output sft.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qualification.tools.metrics import emit, fail


def best_rows(corpus: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        group = json.loads(line)
        ranked = sorted(
            enumerate(group["completions"]), key=lambda item: (-item[1]["reward"], item[0])
        )
        for _, completion in ranked:
            actions = [t["content"] for t in completion["trajectory"] if t["kind"] == "action"]
            text = actions[0].split("</think>")[-1].strip() if actions else ""
            if text:
                reply = {"role": "assistant", "content": text}
                rows.append({"messages": [*group["messages"], reply]})
                break
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rollouts", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    args = p.parse_args()
    rows = best_rows(args.rollouts)
    if not rows:
        return fail(f"no group in {args.rollouts} has a non-empty action")
    with args.output.open("x", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    emit("sft.rows", len(rows), "count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
