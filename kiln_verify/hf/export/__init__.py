"""HF/TRL export: SFT ingestion, GRPO corpus checks, model identity, templates, writer.

==================  ====================================================================
module              contents
==================  ====================================================================
``model_dir``       :class:`ModelSnapshot`: config, tokenizer, vocabulary identity, chat
                    template and every safetensors shard of a local HF model directory
``template``        TRL training template derivation (``{% generation %}`` blocks), the
                    native training identity, HF-style rendering with generation spans
``sft``             SFT row admission and the ``kiln.sft-ingestion.v1`` receipt
``source``          :class:`ExportSource`: the model side both exports share (model,
                    templates, input adapter, served model id, split manifest)
``writer``          :func:`export_sft`, :func:`export_grpo`: staged, verified, no-clobber
                    ``NAME.kiln-hf/`` plus a deterministic ``NAME.kiln-hf.tar.gz``
==================  ====================================================================

Verification lives in :mod:`kiln_verify.hf.verify`, which uses ``sft`` and ``template``;
the writer uses the verifier, so the writer's names (and ``source``'s, which needs the
GRPO scan) are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kiln_verify.hf.export.model_dir import ModelSnapshot, tokenizer_vocab_digest
from kiln_verify.hf.export.sft import SftExample, SftIngestion, ingest_sft_file
from kiln_verify.hf.export.template import derive_training_template, native_training_template

if TYPE_CHECKING:
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.export.writer import ExportOutcome, export_grpo, export_sft, plan_targets

_WRITER = frozenset({"ExportOutcome", "export_grpo", "export_sft", "plan_targets"})


def __getattr__(name: str) -> Any:
    if name in _WRITER:
        from kiln_verify.hf.export import writer

        return getattr(writer, name)
    if name == "ExportSource":
        from kiln_verify.hf.export.source import ExportSource

        return ExportSource
    raise AttributeError(name)


__all__ = [
    "ExportOutcome",
    "ExportSource",
    "ModelSnapshot",
    "SftExample",
    "SftIngestion",
    "derive_training_template",
    "export_grpo",
    "export_sft",
    "ingest_sft_file",
    "native_training_template",
    "plan_targets",
    "tokenizer_vocab_digest",
]
