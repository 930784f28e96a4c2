"""Paired held-out evaluation, base model versus base + adapter, and its receipt's digests.

Runs ``kiln-verify openenv evaluate`` live against the embedded oracle with the transformers
policy on both sides, then reports from ``OUTPUT/receipt.json``: its SHA-256 (the receipt
binds both rollout summaries by digest), the summaries' digests, the paired group count, the
means and the decision. The decision itself is not gated (one tiny LoRA step is not expected
to improve anything); what is required is a complete, hash-bound receipt whose candidate
names the adapter.

    python qualification/tools/evaluate.py --kiln-verify KV --model M --adapter A \
        --device cpu --groups 20 --training-groups 4 --output-dir DIR --prefix sft
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qualification.tools.metrics import emit, fail


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kiln-verify", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--adapter", required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--oracle", default="bandit")
    p.add_argument("--groups", type=int, required=True)
    p.add_argument("--training-groups", type=int, required=True)
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--prefix", required=True)
    args = p.parse_args()
    side = [f"model_dir={args.model}", f"device={args.device}"]
    command = [
        args.kiln_verify, "openenv", "evaluate", "--oracle", args.oracle,
        "--groups", str(args.groups), "--group-size", "1", "--max-steps", "1",
        "--no-thinking", "--max-action-tokens", "16", "--concurrency", "1",
        "--training-seed-start", "0", "--training-groups", str(args.training_groups),
        "--baseline-policy", "transformers", "--candidate-policy", "transformers",
        *(x for opt in side for x in ("--baseline-policy-option", opt)),
        *(x for opt in side for x in ("--candidate-policy-option", opt)),
        "--candidate-policy-option", f"adapter_dir={args.adapter}",
        "--output-dir", str(args.output_dir),
    ]  # fmt: skip
    print("running:", " ".join(command), flush=True)
    code = subprocess.run(command, check=False).returncode
    emit(f"{args.prefix}.eval_exit_code", code)
    receipt_path = args.output_dir / "receipt.json"
    if not receipt_path.is_file():
        return fail(f"evaluate exited {code} without writing {receipt_path}")
    data = receipt_path.read_bytes()
    receipt = json.loads(data)
    evidence = receipt["evidence"]
    emit(f"{args.prefix}.eval_receipt_sha256", "sha256:" + hashlib.sha256(data).hexdigest())
    emit(f"{args.prefix}.eval_baseline_summary_sha256", receipt["baseline_summary_sha256"])
    emit(f"{args.prefix}.eval_candidate_summary_sha256", receipt["candidate_summary_sha256"])
    emit(f"{args.prefix}.eval_seed_start", receipt["seed_start"])
    emit(f"{args.prefix}.eval_paired_groups", evidence["paired_groups"], "count")
    emit(f"{args.prefix}.eval_baseline_mean_return", evidence["baseline_mean_return"])
    emit(f"{args.prefix}.eval_candidate_mean_return", evidence["candidate_mean_return"])
    emit(f"{args.prefix}.eval_decision", evidence["decision"])
    emit(
        f"{args.prefix}.eval_candidate_has_adapter", receipt["candidate"].get("adapter") is not None
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
