"""Multi-turn token streams: ``hf verify`` with token replay versus ``sha256sum``, and the
``transformers`` policy's recording overhead per generated token.

1. **Verification.** Builds the tiny model (prefix-preserving thinking template), a few
   distinct multi-turn GRPO groups whose streams are assembled turn by turn with
   :func:`kiln_verify.tokens.next_turn` (three actions, long maze-like observations, a
   thinking budget with forced close tokens), repeats them into a corpus of at least
   ``--corpus-mib`` MiB (default 200), exports a small bundle and reseals it around the big
   corpus (exporting it would replay it twice). Then times, interleaved over ``--rounds``
   rounds after a warm-up: :func:`kiln_verify.hf.verify.verify_hf_path` on the bundle (every
   file hashed, every row parsed and every stream replayed) and ``sha256sum`` over the same
   files.
2. **Recording overhead.** The ``transformers`` policy plays ``--turns`` turns of
   ``--tokens`` sampled tokens each, continuing its own token stream (``prior``, the
   ``--grpo-output`` path), against a bare loop over the same model that samples the same
   number of tokens from the same contexts with the same operations (forward with cache,
   tempered log-softmax, one multinomial draw) and records nothing. Reported: milliseconds
   per generated token for each and their ratio.

    python -m benchmarks.hf_stream --json
    python -m benchmarks.hf_stream --corpus-mib 4 --rounds 1 --json   # quick run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MiB = 2**20


def _stream_group(
    codec: Any, index: int, identities: tuple[dict[str, Any], dict[str, str]]
) -> dict[str, Any]:
    from kiln_verify.hf.digests import prompt_messages_digest, scored_payload_digest
    from kiln_verify.tokens import THINK_CLOSE, chat_message, next_turn

    grid = "\n".join("#" + "".join(".#"[(x * 7 + y * 3 + index) % 5 == 0] for x in range(13)) + "#"
                     for y in range(13))  # fmt: skip
    messages = [{"role": "system", "content": "Walk from A to G. " * 20},
                {"role": "user", "content": f"reset result {index}:\n{grid}"}]  # fmt: skip
    invocation = {"template_kwargs": {"enable_thinking": True}}
    close, eos = codec.encode(THINK_CLOSE), codec.encode("<|im_end|>")
    completions = []
    for candidate in range(2):
        text = codec.render(messages, invocation, generation_prompt=True)
        ids = codec.encode(text)
        prompt_count, trajectory, tokens = len(ids), [], []
        for step in range(3):
            body = [(t, "sampled") for t in codec.encode("the answer")[:2]]
            body += [(t, "forced") for t in close]
            move = f'{{"move":{(index + step + candidate) % 4}}}'
            body += [(t, "sampled") for t in codec.encode(move)]
            body += [(t, "sampled") for t in eos]
            action = [t for t, _ in body]
            content = codec.decode(action[:-1])
            for offset, (token, source) in enumerate(body):
                logprob = -0.5 if source == "sampled" else None
                tokens.append({"sequence_index": len(ids) + offset, "token_id": token,
                               "source": source, "behavior_logprob": logprob})  # fmt: skip
            trajectory.append({"role": "assistant", "content": content, "kind": "action"})
            observation = f"step {step} result:\n{grid}\nmoves left {30 - step}"
            segment = {"role": "tool", "content": observation, "kind": "observation"}
            if step < 2:
                chat = messages + [
                    chat_message(s["role"], s["content"]) for s in [*trajectory, segment]
                ]
                text, env = next_turn(codec, invocation, turn_text=text, action_ids=action,
                                      content=content, next_chat=chat, where="bench")  # fmt: skip
                ids += action + env
            else:
                ids += action
            trajectory.append(segment)
        joined = "<TURN_BREAK>".join(s["content"] for s in trajectory if s["kind"] == "action")
        policy, tokenizer = identities
        completions.append({"text": joined, "reward": float(candidate), "trajectory": trajectory,
                            "provenance": {
            "schema": "kiln.rollout-provenance.v1", "input_token_ids": ids,
            "prompt_token_count": prompt_count,
            "prompt_messages_sha256": str(prompt_messages_digest(messages)),
            "scored_payload_sha256": str(scored_payload_digest(joined, trajectory)),
            "action_tokens": tokens, "behavior_policy": policy, "tokenizer": tokenizer,
            "template_invocation": invocation,
            "sampling": {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                         "max_tokens": 32, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                         "frequency_penalty": 0.0, "stop": [],
                         "thinking_budget": {"max_tokens": 2, "close_token_ids": close}},
            "seed": index, "generation_backend": "cpu"}})  # fmt: skip
    return {"messages": messages, "completions": completions}


def _identities(model: Path) -> tuple[dict[str, Any], dict[str, str]]:
    from kiln_verify.core.digest import sha256_bytes
    from kiln_verify.hf.export import ModelSnapshot

    snap = ModelSnapshot.read(model)
    policy = {"served_model_id": snap.served_model_id,
              "base_model_sha256": snap.shards.aggregate_sha256,
              "inference_config_sha256": str(sha256_bytes(b"bench")),
              "implementation": "kiln-verify/bench"}  # fmt: skip
    tokenizer = {"vocab_sha256": str(snap.vocab_sha256),
                 "config_sha256": str(sha256_bytes(snap.tokenizer)),
                 "chat_template_sha256": str(sha256_bytes(snap.chat_template))}  # fmt: skip
    return policy, tokenizer


def build_bundle(root: Path, corpus_mib: int) -> tuple[Path, Path, int, int]:
    """(model, bundle, corpus bytes, rows): a verified bundle resealed around the corpus."""
    from kiln_verify.core.digest import hash_file
    from kiln_verify.errors import HfGrpoPromptReplayMismatch
    from kiln_verify.hf.digests import GrpoCorpusHasher
    from kiln_verify.hf.export import ModelSnapshot, export_grpo
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.manifest import (
        ExportManifest,
        GrpoGroup,
        document_bytes,
        grpo_row_bytes,
        read_export,
    )
    from kiln_verify.testing.tiny_model import THINKING_CHAT_TEMPLATE, build_tiny_model
    from kiln_verify.tokens import TokenCodec

    model = build_tiny_model(root / "model", THINKING_CHAT_TEMPLATE)
    snap = ModelSnapshot.read(model)
    codec = TokenCodec.from_files(
        snap.tokenizer, snap.chat_template, error=HfGrpoPromptReplayMismatch
    )
    identities = _identities(model)
    rows = [grpo_row_bytes(GrpoGroup.model_validate(_stream_group(codec, i, identities)))
            for i in range(16)]  # fmt: skip
    small = root / "small.jsonl"
    small.write_bytes(b"".join(rows[:2]))
    output = root / "bench.kiln-hf.tar.gz"
    source = ExportSource(model=model)
    bundle = export_grpo(source, dataset=small, name="bench", output=output).directory
    target = corpus_mib * MiB
    hasher = GrpoCorpusHasher()
    written = count = 0
    with open(bundle / "train.jsonl", "wb") as out:
        while written < target:
            row = rows[count % len(rows)]
            out.write(row)
            hasher.update(row[:-1])
            written += len(row)
            count += 1
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    found = hash_file(bundle / "train.jsonl", max_bytes=1 << 40)
    fields = export.to_json()
    fields.pop("export_sha256")
    fields["data"]["dataset"]["size_bytes"] = found.size_bytes
    fields["data"]["dataset"]["sha256"] = str(found.sha256)
    fields["data"]["row_count"] = count
    fields["data"]["ordered_corpus_sha256"] = str(hasher.digest())
    (bundle / "kiln_hf_export.json").write_bytes(document_bytes(ExportManifest.create(**fields)))
    return model, bundle, written, count


def time_verify(bundle: Path, rounds: int) -> dict[str, Any]:
    from kiln_verify.hf.verify import verify_hf_path

    files = sorted(str(p) for p in bundle.rglob("*") if p.is_file())
    timings: dict[str, list[float]] = {"verify_lib": [], "sha256sum": []}
    for round_index in range(rounds + 1):
        start = time.perf_counter()
        verify_hf_path(bundle)
        lib = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(["sha256sum", *files], check=True, stdout=subprocess.DEVNULL)
        sha = time.perf_counter() - start
        if round_index:  # the first round warms the page cache and the imports
            timings["verify_lib"].append(lib)
            timings["sha256sum"].append(sha)
    medians = {k: statistics.median(v) for k, v in timings.items()}
    return {"seconds": medians, "ratio": medians["verify_lib"] / medians["sha256sum"],
            "bytes": sum(os.path.getsize(f) for f in files)}  # fmt: skip


def time_recording(model: Path, turns: int, tokens: int) -> dict[str, Any]:
    import torch

    from kiln_verify.openenv.policy.base import PolicyRequest
    from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(model, name="bench")
    eos_free = {"temperature": 1.0, "max_action_tokens": tokens, "thinking": False}
    chat: list[dict[str, str]] = [
        {"role": "system", "content": "Walk the maze. " * 40},
        {"role": "user", "content": "reset result: A at 1,1"},
    ]
    recorded = bare = 0.0
    generated = 0
    prior = None
    for turn in range(turns):
        request = PolicyRequest.for_step(messages=list(chat), action_schema=None, seed=5,
                                         candidate_index=0, step_index=turn, prior=prior,
                                         **eos_free)  # fmt: skip
        start = time.perf_counter()
        response = asyncio.run(policy.act(request))
        recorded += time.perf_counter() - start
        provenance = response.provenance
        assert provenance is not None
        n = len(provenance.completion_token_ids)
        generated += n
        # the bare loop: same model, same context, same operations, nothing recorded
        model_obj = policy._model
        generator = torch.Generator().manual_seed(request.generation_seed)
        start = time.perf_counter()
        with torch.no_grad():
            step_input = torch.tensor([list(provenance.prompt_token_ids)])
            past = None
            for _ in range(n):
                out = model_obj(input_ids=step_input, cache=past, use_cache=True)
                past = out.get("cache")
                log_probs = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
                token = int(torch.multinomial(log_probs.exp(), 1, generator=generator).item())
                step_input = torch.tensor([[token]])
        bare += time.perf_counter() - start
        chat.append({"role": "assistant", "content": response.text})
        chat.append({"role": "tool", "content": f"step {turn} result: moved"})
        prior = provenance
    return {"turns": turns, "generated_tokens": generated,
            "ms_per_token_recorded": 1000 * recorded / generated,
            "ms_per_token_bare": 1000 * bare / generated, "ratio": recorded / bare}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus-mib", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kiln-bench-stream-", dir=args.tmpdir))
    try:
        start = time.perf_counter()
        model, bundle, corpus_bytes, rows = build_bundle(root, args.corpus_mib)
        build = time.perf_counter() - start
        verify = time_verify(bundle, args.rounds)
        recording = time_recording(model, args.turns, args.tokens)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {"benchmark": "hf_stream", "machine": platform.machine(), "cpus": os.cpu_count(),
              "corpus_bytes": corpus_bytes, "rows": rows, "build_seconds": build,
              "verify": verify, "recording": recording}  # fmt: skip
    print(json.dumps(result, indent=2) if args.json else result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
