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
