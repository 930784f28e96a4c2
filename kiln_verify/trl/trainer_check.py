"""Whether a ``GRPOTrainer``'s batches can be recorded exactly, checked before the first.

A bundle maps one generation batch onto whole groups of one behaviour policy
(docs/trl.md, "How a TRL batch maps onto groups"): every rule below names the trainer
setting that would break that mapping and how to fix it; the first broken one is refused
with ``trl_batch_ambiguous`` when the recorder attaches.
"""

from __future__ import annotations

from typing import Any

from kiln_verify.core.digest import canonical_digest
from kiln_verify.errors import KilnError, TrlBatchAmbiguous
from kiln_verify.trl.batch import generation_parameters
from kiln_verify.trl.identity import BaseModel
from kiln_verify.trl.logprobs import active_dropout

__all__ = ["check_trainer"]


def check_trainer(
    trainer: Any,
    group_size: int,
    base: BaseModel,
    *,
    factory: bool,
    rollout_temperature: float | None = None,
) -> None:
    """Refuse a trainer whose batches cannot be recorded exactly (docs/trl.md), before the
    first batch is generated. ``rollout_temperature``: the ``rollout_func``'s sampling
    temperature, which must be the one TRL scores the update at."""
    args = trainer.args
    rules = [
        (
            hasattr(trainer.model, "peft_config"),
            "the model has no PEFT adapter (pass peft_config): a bundle binds the base weights "
            "by digest and the adapter by content, and full fine-tuning changes the base",
        ),
        (args.num_generations == group_size, "num_generations must equal the group_size"),
        (
            args.steps_per_generation == args.gradient_accumulation_steps,
            "steps_per_generation must equal gradient_accumulation_steps (one generation "
            "batch per optimizer step)",
        ),
        (args.num_iterations == 1, "num_iterations must be 1 (each batch trains once)"),
        (
            (args.per_device_train_batch_size * args.steps_per_generation) % group_size == 0,
            "each process's generation batch must hold whole groups",
        ),
        (not args.mask_truncated_completions, "mask_truncated_completions must be off"),
        (
            getattr(trainer, "chat_template", None) is None,
            "TRL swapped in its own training template; the model's template must be "
            "prefix-preserving so TRL renders with it",
        ),
        (
            getattr(trainer.processing_class, "chat_template", None) == base.chat_template,
            "the trainer's chat template differs from the model directory's",
        ),
    ]
    if factory:
        rules.append((trainer.rollout_func is None, "use either the factory or a rollout_func"))
        dropout = None if args.use_vllm else active_dropout(trainer.model)
        rules.append(
            (
                dropout is None,
                f"dropout is active ({dropout}) and TRL samples in training mode, so no "
                "forward reproduces the sampling; set disable_dropout=True in the GRPOConfig "
                "and lora_dropout=0",
            )
        )
    else:
        rules.append((trainer.rollout_func is not None, "the trainer has no rollout_func"))
        rules.append(
            (
                rollout_temperature == float(args.temperature),
                f"the rollout_func samples at temperature {rollout_temperature} but TRL "
                f"scores the update at {args.temperature}; give CollectionOptions the "
                "GRPOConfig's temperature",
            )
        )
    try:
        canonical_digest(generation_parameters(args))
    except (KilnError, TypeError, ValueError):
        rules.append((False, "generation_kwargs must be JSON (the behaviour identity binds it)"))
    for ok, rule in rules:
        if not ok:
            raise TrlBatchAmbiguous(f"the trainer cannot be recorded exactly: {rule}")
