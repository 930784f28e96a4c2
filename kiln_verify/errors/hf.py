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
