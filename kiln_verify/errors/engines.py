"""Errors of the policies, offline bundle verification and paired evaluation."""

from __future__ import annotations

import os
from typing import Any

from kiln_verify.errors.base import KilnError, UsageError

# --- policies (kiln_verify.openenv.policy) ----------------------------------------------


class PolicyError(KilnError, abstract=True):
    """A policy could not be built or could not produce the next model output."""


class PolicyConfigInvalid(PolicyError):
    """The policy name or one of its options is wrong; a usage error, nothing was contacted."""

    code = "policy_config_invalid"
    exit_code = 2
    default_hint = "see docs/policies.md for each policy's options"


class PolicyUnavailable(PolicyError):
    """The policy needs an optional dependency that is not installed."""

    code = "policy_unavailable"
    exit_code = 2
    default_hint = "install the train extra: pip install 'kiln-verify[train]'"


class PolicyScriptInvalid(PolicyError):
    """A policy script file is not in the documented format (docs/policies.md)."""

    code = "policy_script_invalid"
    exit_code = 2
    default_hint = "a script is a JSON array of action texts or an object of such arrays"


class PolicyScriptExhausted(PolicyError):
    """A scripted policy was asked for a step its script does not cover."""

    code = "policy_script_exhausted"
    default_hint = "give the script at least --max-steps action texts for every episode"


class PolicyHttpStatus(PolicyError):
    """The chat-completions server answered with a non-2xx status."""

    code = "policy_http_status"
    default_hint = "check the server URL, the model name and, for 401/403, the API key"


class PolicyRedirect(PolicyError):
    """The chat-completions server answered with a redirect, which is never followed."""

    code = "policy_redirect"
    default_hint = "use the final URL directly; redirects are never followed"


class PolicyTransport(PolicyError):
    """The connection to the chat-completions server failed or timed out."""

    code = "policy_transport"
    default_hint = "check that the inference server is running and reachable"


class PolicyTimeout(PolicyError):
    """A chat-completions call took longer than its timeout (it is not retried: the server
    may still be generating, and a second request would double its load)."""

    code = "policy_timeout"
    default_hint = "lower --max-action-tokens or --concurrency, or make the inference server faster"


class PolicyRateLimited(PolicyError):
    """The chat-completions server kept answering 429 (or asked to wait too long)."""

    code = "policy_rate_limited"
    default_hint = "lower --concurrency, raise the server's rate limit, or retry later"


class PolicyResponseInvalid(PolicyError):
    """The chat-completions response is not strict JSON of the expected shape."""

    code = "policy_response_invalid"
    default_hint = "the server must implement the OpenAI /v1/chat/completions response shape"


class PolicyGenerationFailed(PolicyError):
    """A local model failed to load or to generate (tokenizer, template, forward pass)."""

    code = "policy_generation_failed"
    default_hint = "check the model directory: config, weights, tokenizer and chat template"


class PolicyAdapterInvalid(PolicyError):
    """A ``adapter_dir`` LoRA adapter cannot be read or does not load onto the base model."""

    code = "policy_adapter_invalid"
    exit_code = 2
    default_hint = (
        "adapter_dir must hold the adapter_config.json and adapter_model.safetensors of a PEFT "
        "LoRA adapter trained for this base model"
    )


class GrpoOutputUnsupported(UsageError):
    """``--grpo-output`` was combined with controls whose episodes a GRPO row cannot hold.

    A ``kiln.rollout-provenance.v1`` completion is one generation, so only single-action
    episodes (``--max-steps 1``) in groups of at least two candidates map onto GRPO rows
    exactly (docs/contract.md, "GRPO corpus from a rollout").
    """

    code = "grpo_output_unsupported"
    default_hint = "use `max_steps` 1 and `group_size` 2 or more with `grpo_output`"


class GrpoCorpusUnrepresentable(KilnError):
    """A collected group could not be written as a valid GRPO row; nothing was published."""

    code = "grpo_corpus_unrepresentable"
    default_hint = "the episode data falls outside kiln.rollout-provenance.v1; see the rule"


class PolicyProvenanceMissing(PolicyError):
    """A GRPO corpus was requested but the policy does not record exact token provenance."""

    code = "policy_provenance_missing"
    exit_code = 2
    default_hint = "use --policy transformers (the only built-in policy with token provenance)"


# --- offline bundle verification (kiln-openenv-contract §6) -----------------------------


class BundleError(KilnError, abstract=True):
    """A rollout bundle fails offline verification: a rule of §6 is broken.

    ``location`` names the group / candidate / step (or record) concerned, e.g.
    ``group 3 candidate 1 step 0``; ``path`` is the bundle file the rule was checked in.
    """

    default_hint = (
        "the bundle was modified or produced by a non-conforming collector; "
        "re-collect it or restore the published files"
    )

    def __init__(
        self,
        rule: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
        location: str | None = None,
    ) -> None:
        self.location = location
        super().__init__(rule, path=path, line=line, hint=hint)

    def __str__(self) -> str:
        text = super().__str__()
        if self.location is None:
            return text
        return text.replace(f"{self.code}: ", f"{self.code}: {self.location}: ", 1)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.location is not None:
            out["location"] = self.location
        return out


class BundleDatasetDigestMismatch(BundleError):
    """The JSONL bytes differ from the summary's (or the replay's) size / SHA-256 (§6.3, §6.6)."""

    code = "bundle_dataset_digest_mismatch"


class BundleReplayDigestMismatch(BundleError):
    """The replay file bytes differ from the summary's size / SHA-256 (§6.3)."""

    code = "bundle_replay_digest_mismatch"


class BundleReplayInconsistent(BundleError):
    """The replay manifest contradicts itself (§6.5: indices, terminations, budget, state)."""

    code = "bundle_replay_inconsistent"


class BundleReturnMismatch(BundleError):
    """A recomputed episode return (or reward) differs bit-wise from the recorded one."""

    code = "bundle_return_mismatch"


class BundleHeaderMismatch(BundleError):
    """Summary and replay disagree on environments, max_steps, penalty or counts (§6.6)."""

    code = "bundle_header_mismatch"


class BundleResetPlanMismatch(BundleError):
    """The reset payloads do not reconstruct ``reset_plan_sha256`` (§6.7)."""

    code = "bundle_reset_plan_mismatch"


class BundleGroupPlanMismatch(BundleError):
    """A group breaks the deterministic plan: size, seed, environment, reset seed (§6.8)."""

    code = "bundle_group_plan_mismatch"


class BundleMessagesMismatch(BundleError):
    """A JSONL line's prompt differs from the recomputed initial messages (§6.8)."""

    code = "bundle_messages_mismatch"


class BundleProvenanceMismatch(BundleError):
    """A completion's ``kiln.openenv-rollout.v1`` provenance contradicts the replay (§6.9)."""

    code = "bundle_provenance_mismatch"


class BundleTrajectoryMismatch(BundleError):
    """A completion's trajectory or text does not match the replay exchanges (§6.9)."""

    code = "bundle_trajectory_mismatch"


class BundleRecordMismatch(BundleError):
    """A summary ``rollouts[]`` record contradicts the replay candidate (§6.9)."""

    code = "bundle_record_mismatch"


class BundleStatsMismatch(BundleError):
    """The summary ``stats`` differ from the recomputed statistics (§6.10)."""

    code = "bundle_stats_mismatch"


# --- paired held-out evaluation (kiln-openenv-contract §9) ------------------------------


class EvaluationPairingMismatch(BundleError):
    """Baseline and candidate bundles are not paired (§9 step 3): environments, options, or
    a group's index, environment, seed, reset payload, reset observation or candidates
    differ. No unpaired estimate is ever produced; ``location`` names the group."""

    code = "evaluation_pairing_mismatch"
    default_hint = (
        "collect baseline and candidate with identical options against unchanged "
        "environments (kiln-verify openenv evaluate does both)"
    )
