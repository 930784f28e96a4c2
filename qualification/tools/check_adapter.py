"""Prove an imported adapter is real: nonzero LoRA tensors, a logit delta, a PEFT load.

Loads the base model, then ``PeftModel.from_pretrained(base, ADAPTER)`` on the given device,
and compares logits on a fixed chat prompt with the adapter enabled and disabled. Fails
(exit 1) when no ``lora_B`` tensor is nonzero (the update never reached the adapter) or the
largest absolute logit difference is not above ``--min-delta``.

    python qualification/tools/check_adapter.py --model DIR --adapter REGISTRY/NAME \
        --device cpu --prefix sft
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qualification.tools.metrics import emit, fail

PROMPT = [{"role": "user", "content": 'Reply with JSON {"arm": <0-9>} and nothing else.'}]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--adapter", type=Path, required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--prefix", required=True, help="metric name prefix, e.g. sft or grpo")
    p.add_argument("--min-delta", type=float, default=1e-6)
    args = p.parse_args()

    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    weights = args.adapter / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    nonzero = sum(1 for t in tensors.values() if bool(torch.count_nonzero(t)))
    b_nonzero = sum(1 for k, t in tensors.items() if "lora_B" in k and bool(torch.count_nonzero(t)))
    emit(f"{args.prefix}.tensors", len(tensors), "count")
    emit(f"{args.prefix}.nonzero_tensors", nonzero, "count")
    emit(f"{args.prefix}.nonzero_lora_b_tensors", b_nonzero, "count")
    emit(f"{args.prefix}.weight_bytes", weights.stat().st_size, "bytes")

    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    base = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True)
    base = base.to(args.device).eval()
    model = PeftModel.from_pretrained(base, str(args.adapter)).eval()
    emit(f"{args.prefix}.peft_loaded", True)
    text = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    ids = ids.to(args.device)
    with torch.no_grad():
        tuned = model(input_ids=ids).logits.float()
        with model.disable_adapter():
            plain = model(input_ids=ids).logits.float()
    delta = float((tuned - plain).abs().max())
    emit(f"{args.prefix}.max_abs_logit_delta", delta)
    if b_nonzero == 0:
        return fail(f"{weights}: every lora_B tensor is zero")
    if not delta > args.min_delta:
        return fail(f"logit delta {delta} is not above {args.min_delta}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
