"""Keep the GRPO groups whose rewards differ; equal rewards give zero advantages.

A group whose candidates all earned the same reward contributes nothing to a GRPO update
(every advantage is r - mean = 0), so a one-step qualification update needs at least one
group with a spread. Rows are copied byte for byte (they stay canonical compact JSON).

    python qualification/tools/grpo_select.py --input groups.jsonl --output selected.jsonl
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
    p.add_argument("--output", type=Path, required=True)
    args = p.parse_args()
    lines = args.input.read_bytes().splitlines(keepends=True)
    kept = [
        line for line in lines
        if len({c["reward"] for c in json.loads(line)["completions"]}) > 1
    ]  # fmt: skip
    emit("grpo.groups_collected", len(lines), "count")
    emit("grpo.groups_kept", len(kept), "count")
    if not kept:
        return fail(f"every group in {args.input} has equal rewards: nothing to learn from")
    with args.output.open("xb") as handle:
        handle.writelines(kept)
    return 0


if __name__ == "__main__":
    sys.exit(main())
