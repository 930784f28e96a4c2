"""Errors of the HF/TRL hand-off: bundle records, cross-record identities, imports."""

from __future__ import annotations

from kiln_verify.errors.base import KilnError


class HfError(KilnError, abstract=True):
    """An HF/TRL export, result or import does not prove what it claims."""


class HfIdentityMismatch(HfError):
    """Two records of one hand-off disagree about an identity they both carry.

    Examples: a result names another export digest or task; a GRPO completion's recorded
    prompt or scored-payload digest is not the digest of the row it sits in.
    """

    code = "hf_identity_mismatch"
    default_hint = "the documents come from different hand-offs; use one bundle's files together"


class ResidentIdentityMismatch(HfError):
    """The resident model is not the model the export was made from."""

    code = "resident_identity_mismatch"
    default_hint = "import against the same model directory (weights, tokenizer, templates)"


class AdapterUnloadable(HfError):
    """A PEFT adapter cannot be loaded on the resident model (config or tensor shapes)."""

    code = "adapter_unloadable"
    default_hint = "train the adapter against this model with supported target modules"


class HfBundleExtraFile(HfError):
    """A bundle directory holds a file (or entry) that its manifests do not declare."""

    code = "hf_bundle_extra_file"
    default_hint = "a bundle holds exactly its declared files; remove the extra entry or re-export"


class HfBundleMissingFile(HfError):
    """A file the bundle's manifests declare is absent."""

    code = "hf_bundle_missing_file"
    default_hint = "the bundle is incomplete; extract or export it again"


class HfExportInvalid(HfError):
    """An export input (model directory, dataset, adapter, name) cannot make a valid bundle."""

    code = "hf_export_invalid"
    default_hint = "fix the named input and export again"


class HfSftRowRejected(HfError):
    """An SFT row failed admission under ``--invalid-row-policy fail`` (or none was kept)."""

    code = "hf_sft_row_rejected"
    default_hint = "fix the row, or pass --invalid-row-policy skip to record and skip it"


class HfTrainingTemplateUnderivable(HfError):
    """No TRL training template with ``{% generation %}`` blocks could be derived or read."""

    code = "hf_training_template_underivable"
    default_hint = (
        "pass --training-template FILE: the model's chat template with each assistant "
        "reply wrapped in {% generation %} ... {% endgeneration %}"
    )


class HfGrpoCorpusInvalid(HfError):
    """A GRPO corpus breaks a corpus-level rule (width, behaviour policy, identities, bytes)."""

    code = "hf_grpo_corpus_invalid"
    default_hint = "record the corpus again against the exported model and tokenizer"


class HfGrpoPromptReplayMismatch(HfError):
    """A GRPO group's prompt does not re-render to its recorded prompt token ids.

    The group messages, rendered through the exported inference chat template with the
    recorded template invocation and a generation prompt, then tokenized with the exported
    tokenizer, must give exactly ``input_token_ids[:prompt_token_count]`` (§4.7 replay).
    """

    code = "hf_grpo_prompt_replay_mismatch"
    default_hint = (
        "record the corpus with the exported model's tokenizer and chat template, and keep "
        "the template invocation (tools, template_kwargs such as enable_thinking) it used"
    )


class HfGrpoCompletionReplayMismatch(HfError):
    """A GRPO completion's tokens do not decode to its recorded text, or its token
    accounting cannot be replayed (§4.7)."""

    code = "hf_grpo_completion_replay_mismatch"
    default_hint = "record the corpus again; the completion tokens and text must agree"


class HfTokenReplayUnavailable(HfError):
    """GRPO token replay needs ``jinja2`` and ``tokenizers``, which are not installed.

    Verification fails closed instead of reporting a corpus as verified unreplayed.
    """

    code = "hf_token_replay_unavailable"
    default_hint = "install kiln-verify[train] (jinja2, tokenizers) and verify again"


class TokenStreamError(HfError, abstract=True):
    """A trajectory's recorded token stream breaks the token-stream rule
    (docs/hf-contract.md "The token stream of a trajectory").

    The same codes are raised where a stream is recorded (the ``transformers`` policy under
    ``--grpo-output``) and where it is replayed (``hf export-grpo``, ``hf verify``); the
    reference runner's ``--verify-only`` reports the matching ``grpo-stream-*`` rule.
    """


class ChatTemplateNotPrefixPreserving(TokenStreamError):
    """The chat template rewrites what an earlier turn rendered.

    Turn ``k+1``'s rendering must begin with turn ``k``'s rendering followed by the action
    text and the token the model stopped with, or the tokens the model was conditioned on
    cannot be one growing sequence.
    """

    code = "chat_template_not_prefix_preserving"
    default_hint = (
        "use a chat template that renders earlier turns exactly as it rendered them while "
        "they were generated (keep reasoning in history, close assistant turns with the "
        "model's stop token), or collect with --max-steps 1"
    )


class TokenStreamUnrenderable(TokenStreamError):
    """A trajectory has no token stream under the rule: it does not start with an action,
    an action is not an ``assistant`` turn, or the template refuses the conversation."""

    code = "token_stream_unrenderable"
    default_hint = "record trajectories whose actions are assistant turns, starting with one"


class TokenStreamActionTextMismatch(TokenStreamError):
    """An action's tokens do not decode to its trajectory segment (one character is enough)."""

    code = "token_stream_action_text_mismatch"
    default_hint = "record the corpus again; each action segment is the decoded sampled tokens"


class TokenStreamEnvironmentMismatch(TokenStreamError):
    """The tokens between two actions are not the template's rendering of the environment
    turns between them, tokenized by the exported tokenizer."""

    code = "token_stream_environment_mismatch"
    default_hint = "record the corpus again with the exported tokenizer and chat template"


class TokenStreamBoundaryMismatch(TokenStreamError):
    """The recorded action positions do not start, end or split where the trajectory's
    actions do (a shifted boundary, an unmarked action token, a missing or extra action)."""

    code = "token_stream_boundary_mismatch"
    default_hint = "record the corpus again; action_tokens must cover exactly each action"


class TokenStreamEnvironmentMarkedAction(TokenStreamError):
    """A position the rule assigns to the environment (template or observation tokens) is
    marked as an action token: it would receive a policy gradient it never earned."""

    code = "token_stream_environment_marked_action"
    default_hint = "environment tokens carry no action_tokens entry (env_mask 0)"


class TokenStreamForcedMismatch(TokenStreamError):
    """Forced tokens are not exactly the thinking budget's close tokens at the point the
    budget ran out (for example a sampled token relabelled ``forced``)."""

    code = "token_stream_forced_mismatch"
    default_hint = "only the thinking budget's close tokens, forced once it ran out, are forced"


# --- the HF/TRL export client (kiln-verify hf export-* --url; docs/hf-http-export.md) ---


class HfExportResponseInvalid(HfError):
    """An export route answered outside the contract: not its record, or no strong
    ``ETag`` equal to the export identity."""

    code = "hf_export_response_invalid"
    default_hint = "the server does not keep Kiln's HF/TRL export contract; nothing was published"


class HfExportDownloadInvalid(HfError):
    """The downloaded archive is not the created export: bad headers, a short, long or
    oversized body, or an archive that fails extraction or the pristine verifier."""

    code = "hf_export_download_invalid"
    default_hint = "nothing was published and the server copy is kept: retry the download"


class HfExportCleanupFailed(HfError):
    """The verified archive is published, but deleting the server copy failed."""

    code = "hf_export_cleanup_failed"
    default_hint = "the local archive is verified and kept; run the printed delete command"
