"""The policy interface: what a collector asks a policy and what a policy answers.

A policy turns the chat so far into the model's next raw output. It never parses or
validates the action (the collector does that, so invalid model actions are recorded
exactly as generated) and never talks to the environment.

The per-step generation seed is :func:`generation_seed` (kiln-openenv-contract §5.4);
the collector computes it and passes it in :class:`PolicyRequest`, and every built-in
policy that samples derives all of its randomness from it, so a run is reproducible.
Token provenance follows ``kiln.rollout-provenance.v1`` (kiln-hf-trl-contract §4.7).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kiln_verify.core.digest import Sha256Digest, canonical_digest
from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.errors import PolicyConfigInvalid
from kiln_verify.records.provenance import TokenProvenance

U64_MASK = (1 << 64) - 1
CANDIDATE_SEED_MULTIPLIER = 0x9E3779B97F4A7C15
STEP_SEED_MULTIPLIER = 0xBF58476D1CE4E5B9

ChatMessage = Mapping[str, Any]
Clock = Callable[[], float]
"""Seconds from a monotonic clock; :data:`ZERO_CLOCK` makes latencies exactly 0."""


def ZERO_CLOCK() -> float:
    """A clock that never advances: every measured latency is 0 (deterministic tests)."""
    return 0.0


def generation_seed(seed: int, candidate_index: int, step_index: int) -> int:
    """The sampling seed of one model call (kiln-openenv-contract §5.4, step 4).

    ``seed XOR (candidate_index * 0x9E3779B97F4A7C15) XOR (step_index * 0xBF58476D1CE4E5B9)``
    with wrapping u64 multiplication, so candidate 0 at step 0 uses the group seed itself.
    """
    for name, value in (
        ("seed", seed),
        ("candidate_index", candidate_index),
        ("step_index", step_index),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U64_MASK:
            raise PolicyConfigInvalid(f"{name} must be an integer in [0, 2^64 - 1]")
    return (
        seed
        ^ ((candidate_index * CANDIDATE_SEED_MULTIPLIER) & U64_MASK)
        ^ ((step_index * STEP_SEED_MULTIPLIER) & U64_MASK)
    )


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """Everything a policy may use to produce one action text.

    ``messages`` are the chat so far (the two initial messages, then one message per
    trajectory segment, each at least ``role`` and ``content``). ``observation`` is the
    latest observation payload (``Observation.observation``; a ``legal_actions`` list in it
    is honoured by the ``random`` policy). ``generation_seed`` is :func:`generation_seed`
    of (``seed``, ``candidate_index``, ``step_index``).

    ``thinking_budget_tokens`` (thinking on) bounds the sampled reasoning tokens; a policy
    that can force the close tokens does (the ``transformers`` policy). ``prior`` is the
    previous turn's :class:`TokenProvenance` of the same episode when the collector records
    token provenance (``--grpo-output``): a recording policy continues that token stream
    (kiln_verify.tokens.stream) instead of rendering the chat afresh.
    """

    messages: Sequence[ChatMessage]
    action_schema: Any
    generation_seed: int
    temperature: float = 1.0
    max_action_tokens: int = 256
    thinking: bool = True
    observation: Any = None
    environment_name: str = ""
    seed: int = 0
    candidate_index: int = 0
    step_index: int = 0
    thinking_budget_tokens: int | None = None
    prior: TokenProvenance | None = None

    @classmethod
    def for_step(
        cls,
        *,
        messages: Sequence[ChatMessage],
        action_schema: Any,
        seed: int,
        candidate_index: int,
        step_index: int,
        **kwargs: Any,
    ) -> PolicyRequest:
        """Build a request whose ``generation_seed`` is derived with the §5.4 formula."""
        return cls(
            messages=messages,
            action_schema=action_schema,
            generation_seed=generation_seed(seed, candidate_index, step_index),
            seed=seed,
            candidate_index=candidate_index,
            step_index=step_index,
            **kwargs,
        )


@dataclass(frozen=True, slots=True)
class PolicyResponse:
    """One model output. ``text`` is the raw final content (what the collector parses);
    ``reasoning`` the separated thinking text when the model thought, else ``None``.
    """

    text: str
    reasoning: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    finish_reason: str | None = None
    provenance: TokenProvenance | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class BehaviorPolicyIdentity:
    """Which policy produced the outputs, with every parameter that changes them.

    ``parameters`` must be JSON (it is part of :attr:`digest`, the canonical digest of
    ``{"kind", "name", "parameters"}`` plus the two optional keys). ``model_sha256`` is the
    content digest of local model weights when the policy has them; ``adapter`` is the
    ``{"name", "content_sha256"}`` of a LoRA adapter applied on top of them (the same pair
    an HF export records for its input adapter), so base and base+adapter never share an
    identity. Secrets never go in here.
    """

    kind: str
    name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    model_sha256: Sha256Digest | None = None
    adapter: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not self.kind or not self.name:
            raise PolicyConfigInvalid("a policy identity needs a kind and a name")
        dumps_canonical(dict(self.parameters))  # JSON-encodable or a KilnError now

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "parameters": dict(self.parameters),
        }
        if self.model_sha256 is not None:
            out["model_sha256"] = str(self.model_sha256)
        if self.adapter is not None:
            out["adapter"] = dict(self.adapter)
        return out

    @property
    def digest(self) -> Sha256Digest:
        return canonical_digest(self.to_dict())

    def rollout_identity(self) -> dict[str, Any]:
        """The ``RolloutBehaviorPolicyIdentityV1`` shape (kiln-openenv-contract §2.11).

        ``served_model_id`` is the name, ``base_model_sha256`` the model content digest (or,
        for policies without weights, the digest of ``{"kind", "name"}``),
        ``adapter`` the adapter pair (omitted without one), ``inference_config_sha256`` the
        canonical digest of the parameters and ``implementation`` ``kiln-verify/<kind>``.
        """
        model = self.model_sha256 or canonical_digest({"kind": self.kind, "name": self.name})
        out: dict[str, Any] = {
            "served_model_id": self.name,
            "base_model_sha256": str(model),
        }
        if self.adapter is not None:
            out["adapter"] = dict(self.adapter)
        out["inference_config_sha256"] = str(canonical_digest(dict(self.parameters)))
        out["implementation"] = f"kiln-verify/{self.kind}"
        return out


@runtime_checkable
class TokenizerBound(Protocol):
    """A policy whose every response carries :class:`TokenProvenance` from one tokenizer.

    ``tokenizer_identity`` is the ``tokenizer`` block of ``kiln.rollout-provenance.v1``
    (``vocab_sha256``, ``config_sha256``, ``chat_template_sha256``) computed exactly as an
    HF export computes it, so a GRPO corpus built from the policy's outputs binds to the
    export of the same model directory. Only such policies can feed ``--grpo-output``.
    """

    def tokenizer_identity(self) -> Mapping[str, str]: ...


@runtime_checkable
class Policy(Protocol):
    """A behaviour policy. ``act`` may be called concurrently for different candidates."""

    async def act(self, request: PolicyRequest) -> PolicyResponse: ...

    def identity(self) -> BehaviorPolicyIdentity: ...

    async def aclose(self) -> None: ...


def elapsed_ms(clock: Clock, start: float) -> float:
    """Milliseconds since ``start`` on ``clock``, never negative."""
    return max(0.0, (clock() - start) * 1000.0)


MONOTONIC: Clock = time.monotonic
