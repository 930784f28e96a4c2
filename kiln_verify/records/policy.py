"""Which model produced a rollout: the behaviour-policy identity record and its adapter.

``RolloutBehaviorPolicyIdentityV1`` (kiln-inference-v1) is recorded by OpenEnv rollouts and
summaries and by HF/TRL GRPO rows alike: the same weights digest, adapter pair and
inference-configuration digest bind a corpus to the model that generated it.
"""

from __future__ import annotations

from kiln_verify.records.base import Record
from kiln_verify.records.fields import IdentityText, Sha256

__all__ = ["AdapterIdentity", "BehaviorPolicyIdentity"]


class AdapterIdentity(Record):
    """The LoRA adapter a behaviour policy used: name plus exact content digest."""

    name: IdentityText
    content_sha256: Sha256


class BehaviorPolicyIdentity(Record):
    """``RolloutBehaviorPolicyIdentityV1``: which model weights and runtime produced actions."""

    _omit_when_none = frozenset({"adapter"})

    served_model_id: IdentityText
    base_model_sha256: Sha256
    adapter: AdapterIdentity | None = None
    inference_config_sha256: Sha256
    implementation: IdentityText
