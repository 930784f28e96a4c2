"""Which weights generated a batch: the base model's export identity plus the adapter's
content revision at that step.

The base is read exactly as ``hf export`` reads a model directory
(:class:`~kiln_verify.hf.export.model_dir.ModelSnapshot`: the ``kiln.base-model-content.v1``
shard aggregate, the served model id, the tokenizer and inference-template identities), so
a step's corpus exports against the same directory without extra flags. The adapter is
the trainer's live PEFT adapter, saved with PEFT's own ``save_pretrained`` into a private
temporary directory right before the batch is generated; its bytes are kept (the bundle
carries them, so the step can be exported with ``--input-adapter`` and trained again) and
its identity is the §5.6 content revision of those bytes, the pair an export records for
an input adapter. A trainer without a PEFT adapter is refused: full fine-tuning changes
the base weights every step, and a bundle cannot bind them without copying them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kiln_verify.core.digest import canonical_digest, sha256_bytes
from kiln_verify.errors import KilnError, TrlBatchAmbiguous
from kiln_verify.hf.digests import adapter_content_revision
from kiln_verify.hf.export.model_dir import ModelSnapshot
from kiln_verify.hf.rerender import TokenRerender
from kiln_verify.records import BehaviorPolicyIdentity

__all__ = ["ADAPTER_NAME", "AdapterSnapshot", "BaseModel", "adapter_snapshot"]

ADAPTER_NAME: Final = "adapter"
"""The behaviour adapter's name and its directory inside a step bundle."""

_CONFIG = "adapter_config.json"
_WEIGHTS = "adapter_model.safetensors"


@dataclass(frozen=True, slots=True)
class AdapterSnapshot:
    """The adapter's two files as PEFT saved them, and their identity."""

    config: bytes
    weights: bytes

    @property
    def content_sha256(self) -> str:
        revision = adapter_content_revision(
            sha256_bytes(self.weights), len(self.weights), sha256_bytes(self.config)
        )
        return "sha256:" + revision

    def files(self) -> dict[str, bytes]:
        return {
            f"{ADAPTER_NAME}/{_CONFIG}": self.config,
            f"{ADAPTER_NAME}/{_WEIGHTS}": self.weights,
        }


@contextlib.contextmanager
def _no_model_card(model: Any) -> Iterator[None]:
    """PEFT's ``save_pretrained`` also renders a ``README.md`` model card (about 13 ms of a
    20 ms snapshot on the benchmark's model, docs/performance.md); the snapshot keeps only
    the config and weights, whose bytes do not depend on it. Shadowed on the instance for
    the one call, then removed."""
    if "create_or_update_model_card" in vars(model):
        yield
        return
    model.create_or_update_model_card = lambda *_args, **_kwargs: None
    try:
        yield
    finally:
        del model.create_or_update_model_card


def adapter_snapshot(model: Any) -> AdapterSnapshot:
    """Save the live PEFT adapter (PEFT's ``save_pretrained``) and keep its bytes."""
    if not hasattr(model, "peft_config") or not hasattr(model, "save_pretrained"):
        raise TrlBatchAmbiguous(
            "the trainer's model has no PEFT adapter: recording needs one (pass peft_config), "
            "because a bundle binds the base weights by digest and the adapter by content"
        )
    # PEFT writes set-valued config fields (``target_modules``) as ``list(set)``, in string
    # hash order: sorted first, so equal weights give equal bytes and one content revision
    # across runs and ranks (the bundle's train.py saves its adapters the same way).
    for config in model.peft_config.values():
        for key, value in vars(config).items():
            if isinstance(value, set | frozenset):
                setattr(config, key, sorted(value))
    with tempfile.TemporaryDirectory(prefix="kiln-trl-adapter-") as scratch:
        with _no_model_card(model):
            model.save_pretrained(scratch, safe_serialization=True)
        root = Path(scratch)
        if not (root / _WEIGHTS).is_file():  # a named adapter is saved in a subdirectory
            found = [p.parent for p in root.rglob(_WEIGHTS)]
            if len(found) != 1:
                raise TrlBatchAmbiguous("the model holds several PEFT adapters; record one")
            root = found[0]
        return AdapterSnapshot((root / _CONFIG).read_bytes(), (root / _WEIGHTS).read_bytes())


class BaseModel:
    """The base model directory as an export sees it, read once."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        try:
            snapshot = ModelSnapshot.read(self.directory)
        except KilnError as exc:
            raise TrlBatchAmbiguous(
                f"the base model directory cannot be exported, so no corpus can bind to it "
                f"({exc.code}: {exc.rule})"
            ) from None
        self.served_model_id = snapshot.served_model_id
        self.base_model_sha256 = snapshot.shards.aggregate_sha256
        self.chat_template = snapshot.chat_template.decode("utf-8")
        self.tokenizer_identity = {
            "vocab_sha256": str(snapshot.vocab_sha256),
            "config_sha256": str(sha256_bytes(snapshot.tokenizer)),
            "chat_template_sha256": str(sha256_bytes(snapshot.chat_template)),
        }
        self._tokenizer = snapshot.tokenizer
        self._template = snapshot.chat_template
        self._rerender: TokenRerender | None = None

    def rerender_sources(self) -> tuple[bytes, bytes]:
        """The exported ``tokenizer.json`` and chat template bytes the re-rendering reads."""
        return self._tokenizer, self._template

    def rerender(self) -> TokenRerender:
        """``hf verify``'s token re-rendering over the exported tokenizer and template (built once:
        it parses ``tokenizer.json``, about 1 ms per recorded step otherwise)."""
        if self._rerender is None:
            self._rerender = TokenRerender(self._tokenizer, self._template)
        return self._rerender

    def behavior(
        self, adapter: AdapterSnapshot, parameters: dict[str, Any]
    ) -> BehaviorPolicyIdentity:
        """The behaviour identity of a batch generated with ``adapter`` on this base."""
        return BehaviorPolicyIdentity.model_validate(
            {
                "served_model_id": self.served_model_id,
                "base_model_sha256": str(self.base_model_sha256),
                "adapter": {"name": ADAPTER_NAME, "content_sha256": adapter.content_sha256},
                "inference_config_sha256": str(canonical_digest(parameters)),
                "implementation": "kiln-verify/trl",
            }
        )
