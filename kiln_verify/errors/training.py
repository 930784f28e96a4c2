"""Errors of the training chain: the corpus lineage and the trainer's retained evidence.

Two families. :class:`TrainingDataError` is a corpus that cannot be admitted to GRPO as one
``kiln.openenv-training-data.v1`` lineage (kiln-openenv-contract §3.3); each semantic rule
Kiln's schema lists has its own code. :class:`TrainingChainBroken` is a link of the
evidence chain that does not hold (``train_receipt`` ↔ ``adapter_manifest`` ↔ lineage ↔
corpus ↔ contract ↔ adapter bytes); each class names the two records that disagree in
:attr:`TrainingChainBroken.records`, and its message starts with them, so the offline
``verify-run`` says which link broke, not only that one did.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from kiln_verify.errors.base import KilnError

# --- the corpus lineage (kiln.openenv-training-data.v1) ----------------------------------


class TrainingDataError(KilnError, abstract=True):
    """A corpus breaks a semantic rule of ``kiln.openenv-training-data.v1`` (§3.3)."""


class TrainingDataEmpty(TrainingDataError):
    """The corpus has no group: a lineage needs at least one group and one rollout."""

    code = "training_data_empty"
    default_hint = "training selection left nothing to train; the run completes without a trainer"


class TrainingDataNotOpenEnv(TrainingDataError):
    """A completion has no ``openenv`` provenance: ordinary and OpenEnv data never mix."""

    code = "training_data_not_openenv"
    default_hint = "train only on a corpus collected by the OpenEnv collector"


class TrainingDataRewardMismatch(TrainingDataError):
    """A completion's ``reward`` is not its ``openenv.episode_return`` bit for bit."""

    code = "training_data_reward_mismatch"


class TrainingDataGroupMismatch(TrainingDataError):
    """The candidates of one group do not share endpoint, schema hashes, reset hash and seed."""

    code = "training_data_group_mismatch"


class TrainingDataEnvironmentDrift(TrainingDataError):
    """One base URL appears with two names, OpenAPI versions or schema identities."""

    code = "training_data_environment_drift"


class TrainingDataBehaviorPolicyMixed(TrainingDataError):
    """The completions carry more than one behaviour-policy identity (or some carry none)."""

    code = "training_data_behavior_policy_mixed"


class TrainingDataTotalsInconsistent(TrainingDataError):
    """A lineage's counts disagree: per-environment sums, terminations, seeds or order."""

    code = "training_data_totals_inconsistent"


# --- the evidence chain (train_receipt, adapter_manifest) --------------------------------


class TrainingChainBroken(KilnError, abstract=True):
    """Two records of a training run's evidence chain disagree.

    ``records`` names them (artifact kinds or record names, in chain order); the rule is
    prefixed with ``"<left> and <right> disagree: "``.
    """

    records: ClassVar[tuple[str, str]]
    default_hint = "the run's evidence was altered or is incomplete; do not serve this adapter"

    def __init__(
        self,
        rule: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        left, right = self.records
        super().__init__(f"{left} and {right} disagree: {rule}", path=path, line=line, hint=hint)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["records"] = list(self.records)
        return out


class TrainingReceiptUnsuccessful(TrainingChainBroken):
    """The trainer of the receipt did not exit 0; nothing it wrote may be installed."""

    code = "training_receipt_unsuccessful"
    records = ("train_receipt", "trainer")


class TrainingChainCorpusMismatch(TrainingChainBroken):
    """The receipt's corpus digest or size is not that of the selected corpus present."""

    code = "training_chain_corpus_mismatch"
    records = ("train_receipt", "training corpus")


class TrainingChainLineageMismatch(TrainingChainBroken):
    """The receipt's lineage is not the lineage recomputed from the selected corpus."""

    code = "training_chain_lineage_mismatch"
    records = ("train_receipt", "training corpus lineage")


class TrainingChainStatusMismatch(TrainingChainBroken):
    """The run status's ``training.training_data.openenv`` is not the receipt's lineage."""

    code = "training_chain_status_mismatch"
    records = ("run status", "train_receipt")


class TrainingChainContractMismatch(TrainingChainBroken):
    """The receipt's contract digest or output adapter is not the run's training contract."""

    code = "training_chain_contract_mismatch"
    records = ("training contract", "train_receipt")


class TrainingChainManifestMismatch(TrainingChainBroken):
    """The adapter manifest does not bind this receipt (hash, adapter, corpus, group plan)."""

    code = "training_chain_manifest_mismatch"
    records = ("train_receipt", "adapter_manifest")


class TrainingChainAdapterMismatch(TrainingChainBroken):
    """The adapter files present are not exactly the manifest's (missing, extra, bytes)."""

    code = "training_chain_adapter_mismatch"
    records = ("adapter_manifest", "adapter files")
