"""A behaviour source without a model, for admission tests that need no weights."""

from __future__ import annotations

from collections.abc import Collection

from kiln_verify.control.request import BASE_ADAPTER
from kiln_verify.errors import ApiAdapterUnknown
from kiln_verify.records.policy import BehaviorPolicyIdentity

DIGEST = "sha256:" + "ab" * 32


class FixedSource:
    """Plays ``base`` and ``behaviour-1`` with fixed identities; ``taken`` is installed too."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def behaviour(self, adapter: str) -> BehaviorPolicyIdentity:
        self.asked.append(adapter)
        if adapter not in (BASE_ADAPTER, "behaviour-1"):
            raise ApiAdapterUnknown(f"{adapter} is not installed")
        identity = {
            "served_model_id": "tiny",
            "base_model_sha256": DIGEST,
            "inference_config_sha256": DIGEST,
            "implementation": "test/fixed",
        }
        if adapter != BASE_ADAPTER:
            identity["adapter"] = {"name": adapter, "content_sha256": DIGEST}  # type: ignore[assignment]
        return BehaviorPolicyIdentity.model_validate(identity)

    def installed(self) -> Collection[str]:
        return frozenset({"behaviour-1", "taken"})
