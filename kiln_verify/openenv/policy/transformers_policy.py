"""The ``transformers`` policy: a local Hugging Face causal LM with its chat template.

Needs the ``train`` extra (torch, transformers); both are imported when the policy is
built, never when this module is imported. Each step renders the chat with the model's
chat template (``add_generation_prompt=True``, ``enable_thinking`` = the thinking flag),
then samples token by token with a ``torch.Generator`` seeded with the generation seed:
logits / temperature, softmax, one multinomial draw (temperature 0 is greedy with
log-probability 0). The behaviour log-probability of each token is the log-softmax of that
same tempered distribution at the drawn token. Generation stops at an end-of-sequence
token (kept in the completion ids) or after ``max_action_tokens`` tokens. With thinking on,
the decoded completion is split at the first ``</think>`` into ``reasoning`` and ``text``;
with no ``</think>`` the whole completion is reasoning and ``text`` is empty.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from kiln_verify.core.digest import Sha256Digest, canonical_digest, hash_file
from kiln_verify.errors import (
    LimitExceeded,
    PathMissing,
    PolicyConfigInvalid,
    PolicyGenerationFailed,
    PolicyUnavailable,
)
from kiln_verify.limits import MAX_MODEL_FILE_BYTES, MAX_MODEL_FILES
from kiln_verify.openenv.policy.base import (
    MONOTONIC,
    BehaviorPolicyIdentity,
    Clock,
    PolicyRequest,
    PolicyResponse,
    SamplingParameters,
    TokenProvenance,
    elapsed_ms,
)

THINK_CLOSE = "</think>"


def _model_digest(directory: Path) -> tuple[str, dict[str, str]]:
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.is_symlink())
    if len(files) > MAX_MODEL_FILES:
        raise LimitExceeded(
            "the model directory",
            limit="MAX_MODEL_FILES",
            bound=MAX_MODEL_FILES,
            observed=len(files),
        )
    listing: list[tuple[str, str, int]] = []
    for path in files:
        digest = hash_file(path, max_bytes=MAX_MODEL_FILE_BYTES)
        listing.append((path.name, str(digest.sha256), digest.size_bytes))
    by_name = {name: sha for name, sha, _ in listing}
    return str(canonical_digest([list(item) for item in listing])), by_name


class TransformersPolicy:
    """Seeded local sampling with exact token provenance; calls run one at a time."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        name: str | None = None,
        device: str = "cpu",
        clock: Clock = MONOTONIC,
    ) -> None:
        directory = Path(model_dir)
        if not directory.is_dir():
            raise PathMissing("the model directory does not exist", path=os.fspath(model_dir))
        try:
            import torch
            import transformers
        except ImportError:
            raise PolicyUnavailable(
                "the transformers policy needs torch and transformers"
            ) from None
        self._torch: Any = torch
        self._model_sha256, files = _model_digest(directory)
        try:
            self._tokenizer: Any = transformers.AutoTokenizer.from_pretrained(
                directory, local_files_only=True
            )
            self._model: Any = transformers.AutoModelForCausalLM.from_pretrained(
                directory, local_files_only=True, dtype=torch.float32
            )
        except Exception as exc:
            raise PolicyGenerationFailed(
                f"cannot load the model directory ({type(exc).__name__})", path=os.fspath(directory)
            ) from None
        if not getattr(self._tokenizer, "chat_template", None):
            raise PolicyConfigInvalid("the model directory has no chat template")
        loaded: Any = self._model
        loaded.to(device)
        loaded.eval()
        self._device = device
        eos = self._model.generation_config.eos_token_id
        eos_ids = eos if isinstance(eos, list) else [eos]
        if self._tokenizer.eos_token_id is not None:
            eos_ids.append(self._tokenizer.eos_token_id)
        self._eos = frozenset(int(i) for i in eos_ids if i is not None)
        self._name = name or directory.resolve().name
        self._clock = clock
        self._lock = asyncio.Lock()
        self._parameters = {
            "files": files,
            "device": device,
            "dtype": "float32",
            "sampler": "kiln-verify-multinomial/v1",
        }

    def _prompt_ids(self, request: PolicyRequest) -> list[int]:
        text = self._tokenizer.apply_chat_template(
            [dict(m) for m in request.messages],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=request.thinking,
        )
        ids = self._tokenizer(text, add_special_tokens=False)["input_ids"]
        return [int(i) for i in ids]

    def _generate(self, request: PolicyRequest) -> PolicyResponse:
        torch = self._torch
        start = self._clock()
        try:
            prompt = self._prompt_ids(request)
        except Exception as exc:
            raise PolicyGenerationFailed(
                f"the chat template failed to render ({type(exc).__name__})"
            ) from None
        if not prompt:
            raise PolicyGenerationFailed("the chat template rendered an empty prompt")
        generator = torch.Generator(device=self._device)
        generator.manual_seed(request.generation_seed)
        completion: list[int] = []
        logprobs: list[float | None] = []
        temperature = float(request.temperature)
        with torch.no_grad():
            ids = torch.tensor([prompt], device=self._device)
            past = None
            step_input = ids
            for _ in range(request.max_action_tokens):
                out = self._model(input_ids=step_input, cache=past, use_cache=True)
                past = out.get("cache")
                logits = out.logits[0, -1].float()
                if temperature > 0:
                    log_probs = torch.log_softmax(logits / temperature, dim=-1)
                    token = int(torch.multinomial(log_probs.exp(), 1, generator=generator).item())
                    logprob = min(float(log_probs[token].item()), 0.0)
                else:
                    token = int(torch.argmax(logits).item())
                    logprob = 0.0
                completion.append(token)
                logprobs.append(logprob)
                if token in self._eos:
                    break
                step_input = torch.tensor([[token]], device=self._device)
        finish = "stop" if completion and completion[-1] in self._eos else "length"
        body_ids = completion[:-1] if finish == "stop" else completion
        decoded = self._tokenizer.decode(body_ids, skip_special_tokens=False)
        reasoning: str | None = None
        text = decoded
        if request.thinking:
            head, sep, tail = decoded.partition(THINK_CLOSE)
            reasoning, text = (head, tail) if sep else (decoded, "")
        provenance = TokenProvenance(
            prompt_token_ids=tuple(prompt),
            completion_token_ids=tuple(completion),
            behavior_logprobs=tuple(logprobs),
            sources=tuple("sampled" for _ in completion),
            seed=request.generation_seed,
            sampling=SamplingParameters(
                temperature=temperature, max_tokens=request.max_action_tokens
            ),
            template_kwargs={"enable_thinking": request.thinking},
            generation_backend=self._device,
        )
        return PolicyResponse(
            text=text,
            reasoning=reasoning,
            prompt_tokens=len(prompt),
            completion_tokens=len(completion),
            latency_ms=elapsed_ms(self._clock, start),
            finish_reason=finish,
            provenance=provenance,
        )

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        async with self._lock:
            return await asyncio.to_thread(self._generate, request)

    def identity(self) -> BehaviorPolicyIdentity:
        return BehaviorPolicyIdentity(
            kind="transformers",
            name=self._name,
            parameters=self._parameters,
            model_sha256=Sha256Digest.parse(self._model_sha256),
        )

    async def aclose(self) -> None:
        return None
