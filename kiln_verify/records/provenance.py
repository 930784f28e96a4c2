"""Token-level provenance of one generation (kiln-hf-trl-contract §4.7).

The token fields of ``kiln.rollout-provenance.v1``. A policy that knows its tokens (the
local transformers policy) answers with a :class:`TokenProvenance`; the HF/TRL GRPO row
records it. It sits below both halves so the policy interface and the GRPO record share
one definition of what a sampled or forced token is, and of the log-probability bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["MAX_LOGPROB", "SamplingParameters", "TokenProvenance", "TokenSource"]

MAX_LOGPROB: Final = 1e-6
"""Largest accepted sampled log-probability (kiln-hf-trl-contract §4.7: finite, ``<= 1e-6``)."""

TokenSource = Literal["sampled", "forced"]


@dataclass(frozen=True, slots=True)
class SamplingParameters:
    """The sampling block of ``kiln.rollout-provenance.v1`` (kiln-hf-trl-contract §4.7)."""

    temperature: float
    max_tokens: int
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    stop: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "max_tokens": self.max_tokens,
            "repetition_penalty": self.repetition_penalty,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "stop": list(self.stop),
        }


@dataclass(frozen=True, slots=True)
class TokenProvenance:
    """Exact token-level provenance of one generation (kiln-hf-trl-contract §4.7).

    ``completion_token_ids[i]`` was ``sources[i]`` (``sampled`` from the behaviour
    distribution with log-probability ``behavior_logprobs[i]``, or ``forced`` by a thinking
    budget with log-probability ``None``). ``seed`` is the generation seed used.
    """

    prompt_token_ids: tuple[int, ...]
    completion_token_ids: tuple[int, ...]
    behavior_logprobs: tuple[float | None, ...]
    sources: tuple[TokenSource, ...]
    seed: int
    sampling: SamplingParameters
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    generation_backend: str = "cpu"

    def __post_init__(self) -> None:
        n = len(self.completion_token_ids)
        if not self.prompt_token_ids:
            raise ValueError("token provenance needs at least one prompt token")
        if len(self.behavior_logprobs) != n or len(self.sources) != n:
            raise ValueError("completion ids, log-probs and sources must have equal lengths")
        for token in (*self.prompt_token_ids, *self.completion_token_ids):
            if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < 2**32:
                raise ValueError("token ids are u32 integers")
        for source, logprob in zip(self.sources, self.behavior_logprobs, strict=True):
            if source == "sampled":
                if logprob is None or not math.isfinite(logprob) or logprob > MAX_LOGPROB:
                    raise ValueError("a sampled token needs a finite log-probability <= 1e-6")
            elif source == "forced":
                if logprob is not None:
                    raise ValueError("a forced token has no behaviour log-probability")
            else:
                raise ValueError(f"unknown token source {source!r}")

    @property
    def input_token_ids(self) -> tuple[int, ...]:
        """Prompt plus completion: the full sequence at completion (``input_token_ids``)."""
        return self.prompt_token_ids + self.completion_token_ids

    @property
    def prompt_token_count(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def action_mask(self) -> tuple[int, ...]:
        """1 for every sampled completion position, 0 for prompt and forced positions."""
        return (0,) * len(self.prompt_token_ids) + tuple(
            1 if source == "sampled" else 0 for source in self.sources
        )

    def action_tokens(self) -> list[dict[str, Any]]:
        """The ``action_tokens`` entries: ``sequence_index`` counts from the prompt start."""
        start = len(self.prompt_token_ids)
        return [
            {
                "sequence_index": start + offset,
                "token_id": token,
                "source": source,
                "behavior_logprob": logprob,
            }
            for offset, (token, source, logprob) in enumerate(
                zip(self.completion_token_ids, self.sources, self.behavior_logprobs, strict=True)
            )
        ]

    def to_dict(self) -> dict[str, Any]:
        """The token fields of ``kiln.rollout-provenance.v1`` that one generation determines."""
        out: dict[str, Any] = {
            "input_token_ids": list(self.input_token_ids),
            "prompt_token_count": self.prompt_token_count,
            "action_tokens": self.action_tokens(),
            "sampling": self.sampling.to_dict(),
            "seed": self.seed,
            "generation_backend": self.generation_backend,
        }
        if self.template_kwargs:
            out["template_invocation"] = {"template_kwargs": dict(self.template_kwargs)}
        return out
