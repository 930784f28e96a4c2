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

Token streams (docs/hf-contract.md, "The token stream of a trajectory"): rendering,
encoding and decoding go through one :class:`~kiln_verify.tokens.TokenCodec` (the loaded
fast tokenizer's ``tokenizers`` backend and the chat template, with the special-token
strings ``apply_chat_template`` passes). When the request carries the previous turn's
provenance (``prior``, recorded collections), the context is that turn's token stream plus
the environment tokens :func:`kiln_verify.tokens.next_turn` derives, so the model is
conditioned on exactly the sequence the GRPO row records; a template that rewrites earlier
turns is refused there (``chat_template_not_prefix_preserving``). Without ``prior`` the
chat is rendered afresh, as before.

Thinking budget (``thinking_budget_tokens`` B, thinking on): once B tokens were sampled
without ``</think>`` having been decoded, the tokens of ``</think>``
(:meth:`TransformersPolicy.thinking_close_token_ids`) are appended as ``forced`` (no
log-probability) and sampling continues; the forced tokens count toward
``max_action_tokens``, but are always appended in full.

``adapter_dir`` applies a PEFT LoRA adapter (``adapter_config.json`` +
``adapter_model.safetensors``, e.g. one installed by ``kiln-verify hf import-peft`` or
written by an export's ``train.py``) on top of the base weights with
``PeftModel.from_pretrained`` in eval mode, unmerged. ``device`` is ``cpu``, ``cuda`` or
``cuda:N``; the model, every input tensor and the sampling ``torch.Generator`` live there.

The identity binds what changes outputs: ``model_sha256`` is the
``kiln.base-model-content.v1`` aggregate of the ``*.safetensors`` shards (the digest an HF
export records as ``base_model_sha256``; the canonical digest of the whole file listing
when there is no shard), ``parameters["files"]`` every file's digest, and ``adapter`` the
adapter's ``{name, content_sha256}`` (directory name plus the §5.6 content revision, the
pair an export records for ``--input-adapter``). The default name is the one an export
would choose (``config.json`` ``_name_or_path``, else the directory name), so a GRPO
corpus from this policy exports against the same directory without extra flags.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kiln_verify.core.digest import (
    Sha256Digest,
    base_model_aggregate,
    canonical_digest,
    hash_file,
)
from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import (
    KilnError,
    LimitExceeded,
    PathMissing,
    PolicyAdapterInvalid,
    PolicyConfigInvalid,
    PolicyGenerationFailed,
    PolicyUnavailable,
)
from kiln_verify.limits import (
    MAX_ADAPTER_CONFIG_BYTES,
    MAX_MODEL_CONFIG_BYTES,
    MAX_MODEL_FILE_BYTES,
    MAX_MODEL_FILES,
)
from kiln_verify.openenv.policy.base import (
    MONOTONIC,
    BehaviorPolicyIdentity,
    Clock,
    PolicyRequest,
    PolicyResponse,
    elapsed_ms,
)
from kiln_verify.records import SamplingParameters, TokenProvenance, TokenSource
from kiln_verify.tokens import THINK_CLOSE, TokenCodec, next_turn

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_DEVICE = re.compile(r"(cpu|cuda(:[0-9]{1,3})?)")


def _model_files(directory: Path) -> list[tuple[str, Sha256Digest, int]]:
    """(name, digest, size) of every regular file, links followed (HF cache snapshots)."""
    files = sorted(p for p in directory.iterdir() if p.is_file())
    if len(files) > MAX_MODEL_FILES:
        raise LimitExceeded(
            "the model directory",
            limit="MAX_MODEL_FILES",
            bound=MAX_MODEL_FILES,
            observed=len(files),
        )
    listing = []
    for path in files:
        digest = hash_file(os.path.realpath(path), max_bytes=MAX_MODEL_FILE_BYTES)
        listing.append((path.name, digest.sha256, digest.size_bytes))
    return listing


def _model_digest(listing: list[tuple[str, Sha256Digest, int]]) -> Sha256Digest:
    shards = [(sha, size) for name, sha, size in listing if name.endswith(".safetensors")]
    if shards:
        return base_model_aggregate(shards)
    return canonical_digest([[name, str(sha), size] for name, sha, size in listing])


def _default_name(directory: Path) -> str:
    """What ``hf export`` calls the model: ``config.json`` ``_name_or_path`` or the dir name."""
    try:
        config = loads_object(
            (directory / "config.json").read_bytes()[: MAX_MODEL_CONFIG_BYTES + 1],
            max_bytes=MAX_MODEL_CONFIG_BYTES,
            source="config.json",
        )
    except (OSError, KilnError):
        config = {}
    named = config.get("_name_or_path")
    return str(named) if named else directory.resolve().name


def _adapter_identity(adapter_dir: str | os.PathLike[str]) -> tuple[Path, dict[str, str]]:
    """The adapter directory and its ``{name, content_sha256}`` (kiln-hf-trl-contract §5.6)."""
    from kiln_verify.hf.digests import adapter_content_revision

    root = Path(adapter_dir)
    if not root.is_dir():
        raise PathMissing("the adapter directory does not exist", path=os.fspath(adapter_dir))
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if not (root / name).is_file():
            raise PathMissing(
                f"the adapter directory has no {name}",
                path=os.fspath(root / name),
                hint="adapter_dir must hold adapter_config.json and adapter_model.safetensors",
            )
    config = hash_file(os.path.realpath(root / ADAPTER_CONFIG), max_bytes=MAX_ADAPTER_CONFIG_BYTES)
    weights = hash_file(os.path.realpath(root / ADAPTER_WEIGHTS), max_bytes=MAX_MODEL_FILE_BYTES)
    revision = adapter_content_revision(weights.sha256, weights.size_bytes, config.sha256)
    return root, {"name": root.resolve().name, "content_sha256": "sha256:" + revision}


def _load_adapter(model: Any, root: Path) -> Any:
    try:
        import peft
    except ImportError:
        raise PolicyUnavailable("adapter_dir needs the peft package") from None
    try:
        return peft.PeftModel.from_pretrained(model, root, is_trainable=False)
    except Exception as exc:
        raise PolicyAdapterInvalid(
            f"the adapter does not load onto the base model ({type(exc).__name__}: "
            f"{str(exc)[:200]})",
            path=os.fspath(root),
        ) from None


class TransformersPolicy:
    """Seeded local sampling with exact token provenance; calls run one at a time."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        name: str | None = None,
        device: str = "cpu",
        adapter_dir: str | os.PathLike[str] | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        directory = Path(model_dir)
        if not directory.is_dir():
            raise PathMissing("the model directory does not exist", path=os.fspath(model_dir))
        if not _DEVICE.fullmatch(device):
            raise PolicyConfigInvalid(
                f"policy option device must be cpu, cuda or cuda:N (got {device[:32]!r})"
            )
        try:
            import torch
            import transformers
        except ImportError:
            raise PolicyUnavailable(
                "the transformers policy needs torch and transformers"
            ) from None
        if device != "cpu" and not torch.cuda.is_available():
            raise PolicyUnavailable(
                f"device {device} was requested but torch sees no CUDA device",
                hint="use device=cpu or run on a host with an NVIDIA GPU and a CUDA build of torch",
            )
        self._torch: Any = torch
        self._directory = directory
        listing = _model_files(directory)
        self._model_sha256 = _model_digest(listing)
        adapter: dict[str, str] | None = None
        adapter_root: Path | None = None
        if adapter_dir is not None:
            adapter_root, adapter = _adapter_identity(adapter_dir)
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
        if adapter_root is not None:
            self._model = _load_adapter(self._model, adapter_root)
        self._bind(directory, listing, adapter, device=device, name=name, clock=clock)

    @classmethod
    def bound(
        cls,
        model_dir: str | os.PathLike[str],
        model: Any,
        tokenizer: Any,
        *,
        adapter: Mapping[str, str] | None = None,
        device: str = "cpu",
        name: str | None = None,
        clock: Clock = MONOTONIC,
    ) -> TransformersPolicy:
        """A policy over an already loaded model (a trainer's live, possibly PEFT-wrapped
        model; ``kiln_verify.trl``'s ``rollout_func``): the identity is ``model_dir``'s,
        ``adapter`` the ``{name, content_sha256}`` of the adapter the model carries now.
        The caller owns the model's mode and device."""
        import torch

        self = cls.__new__(cls)
        directory = Path(model_dir)
        if not directory.is_dir():
            raise PathMissing("the model directory does not exist", path=os.fspath(model_dir))
        self._torch = torch
        self._directory = directory
        listing = _model_files(directory)
        self._model_sha256 = _model_digest(listing)
        self._tokenizer = tokenizer
        self._model = model
        self._bind(
            directory,
            listing,
            dict(adapter) if adapter else None,
            device=device,
            name=name,
            clock=clock,
            move=False,
        )
        return self

    def _bind(
        self,
        directory: Path,
        listing: list[tuple[str, Sha256Digest, int]],
        adapter: dict[str, str] | None,
        *,
        device: str,
        name: str | None,
        clock: Clock,
        move: bool = True,
    ) -> None:
        template = getattr(self._tokenizer, "chat_template", None)
        backend = getattr(self._tokenizer, "backend_tokenizer", None)
        if not isinstance(template, str) or not template:
            raise PolicyConfigInvalid("the model directory has no chat template")
        if backend is None:
            raise PolicyConfigInvalid("the model directory has no fast (tokenizer.json) tokenizer")
        self._codec = TokenCodec(
            backend, template, special_tokens=dict(self._tokenizer.special_tokens_map)
        )
        self._close_ids = tuple(self._codec.encode(THINK_CLOSE))
        eos = self._model.generation_config.eos_token_id
        eos_ids = list(eos) if isinstance(eos, list) else [eos]
        if self._tokenizer.eos_token_id is not None:
            eos_ids.append(self._tokenizer.eos_token_id)
        self._eos = frozenset(int(i) for i in eos_ids if i is not None)
        if move:
            loaded: Any = self._model
            loaded.to(device)
            loaded.eval()
        self._device = device
        self._name = name or _default_name(directory)
        self._adapter = adapter
        self._tokenizer_identity: dict[str, str] | None = None
        self._clock = clock
        # A thread lock, not an asyncio.Lock: the policy may serve several event loops in
        # turn (one asyncio.run per collection), and an asyncio.Lock binds to the first.
        self._lock = threading.Lock()
        self._parameters = {
            "files": {file: str(sha) for file, sha, _ in listing},
            "device": device,
            "dtype": "float32",
            "sampler": "kiln-verify-multinomial/v1",
        }

    def token_codec(self) -> TokenCodec:
        """The codec this policy renders, encodes and decodes with (the recorder's side of
        the token-stream rule); ``--grpo-output`` replays every row with it."""
        return self._codec

    def thinking_close_token_ids(self) -> tuple[int, ...]:
        """The tokens a thinking budget forces: ``</think>`` encoded without specials."""
        return self._close_ids

    def _prompt_ids(self, request: PolicyRequest) -> list[int]:
        """Turn 0: the chat rendered and encoded; a later recorded turn: the prior stream
        plus the environment tokens the token-stream rule appends."""
        chat = [dict(m) for m in request.messages]
        invocation = {"template_kwargs": {"enable_thinking": request.thinking}}
        prior = request.prior
        if prior is None:
            return self._codec.encode(self._codec.render(chat, invocation, generation_prompt=True))
        last = max((i for i, m in enumerate(chat) if m.get("role") == "assistant"), default=-1)
        if last < 0:
            raise PolicyGenerationFailed("a continued turn needs the previous assistant turn")
        _, env = next_turn(
            self._codec,
            invocation,
            turn_text=self._codec.render(chat[:last], invocation, generation_prompt=True),
            action_ids=prior.completion_token_ids,
            content=str(chat[last].get("content")),
            next_chat=chat,
            where=f"step {request.step_index}",
        )
        return [*prior.input_token_ids, *env]

    def _generate(self, request: PolicyRequest) -> PolicyResponse:
        torch = self._torch
        start = self._clock()
        try:
            prompt = self._prompt_ids(request)
        except KilnError:
            raise
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
        sources: list[TokenSource] = []
        temperature = float(request.temperature)
        budget = request.thinking_budget_tokens if request.thinking else None
        sampled = 0
        closed = budget is None
        with torch.no_grad():
            past = None
            step_input = torch.tensor([prompt], device=self._device)
            while len(completion) < request.max_action_tokens:
                if not closed and sampled == budget:
                    # the budget ran out while thinking: force the close tokens
                    closed = True
                    forced = list(self._close_ids)
                    completion.extend(forced)
                    logprobs.extend(None for _ in forced)
                    sources.extend("forced" for _ in forced)
                    out = self._model(
                        input_ids=torch.tensor([forced], device=self._device),
                        cache=past,
                        use_cache=True,
                    )
                    past = out.get("cache")
                    logits = out.logits[0, -1].float()
                    step_input = None
                    continue
                if step_input is not None:
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
                sources.append("sampled")
                sampled += 1
                if token in self._eos:
                    break
                if not closed:
                    closed = THINK_CLOSE in self._codec.decode(completion[-len(THINK_CLOSE) :])
                step_input = torch.tensor([[token]], device=self._device)
        finish = "stop" if completion and completion[-1] in self._eos else "length"
        body_ids = completion[:-1] if finish == "stop" else completion
        decoded = self._codec.decode(body_ids)
        reasoning: str | None = None
        text = decoded
        if request.thinking:
            head, sep, tail = decoded.partition(THINK_CLOSE)
            reasoning, text = (head, tail) if sep else (decoded, "")
        provenance = TokenProvenance(
            prompt_token_ids=tuple(prompt),
            completion_token_ids=tuple(completion),
            behavior_logprobs=tuple(logprobs),
            sources=tuple(sources),
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

    def _generate_locked(self, request: PolicyRequest) -> PolicyResponse:
        with self._lock:
            return self._generate(request)

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        return await asyncio.to_thread(self._generate_locked, request)

    def identity(self) -> BehaviorPolicyIdentity:
        return BehaviorPolicyIdentity(
            kind="transformers",
            name=self._name,
            parameters=self._parameters,
            model_sha256=self._model_sha256,
            adapter=self._adapter,
        )

    def tokenizer_identity(self) -> Mapping[str, str]:
        """The provenance ``tokenizer`` block, read exactly as ``hf export`` reads it.

        Computed once, on first use (it re-hashes the shards): the export's own
        :class:`~kiln_verify.hf.export.model_dir.ModelSnapshot` is the single rule for the
        vocabulary, tokenizer and inference-template digests. The snapshot must still show
        the weights this policy loaded, else the directory changed under us.
        """
        if self._tokenizer_identity is None:
            from kiln_verify.core.digest import sha256_bytes
            from kiln_verify.hf.export.model_dir import ModelSnapshot

            try:
                snapshot = ModelSnapshot.read(self._directory, served_model_id=self._name)
            except KilnError as exc:
                raise PolicyConfigInvalid(
                    f"the model directory cannot be exported, so no GRPO corpus can bind to it "
                    f"({exc.code}: {exc.rule})",
                    path=os.fspath(self._directory),
                ) from None
            if snapshot.shards.aggregate_sha256 != str(self._model_sha256):
                raise PolicyConfigInvalid(
                    "the model weights changed since the policy loaded them",
                    path=os.fspath(self._directory),
                )
            self._tokenizer_identity = {
                "vocab_sha256": str(snapshot.vocab_sha256),
                "config_sha256": str(sha256_bytes(snapshot.tokenizer)),
                "chat_template_sha256": str(sha256_bytes(snapshot.chat_template)),
            }
        return dict(self._tokenizer_identity)

    async def aclose(self) -> None:
        return None
