"""Where a recorded batch's behaviour log-probabilities come from.

A recorded-GRPO corpus carries, at every sampled token, the log-probability the behaviour
policy gave it (``train.py`` uses them as π_old). There are two sources, and neither costs
a forward of its own:

* **the sampler's own** (vLLM, or the ``rollout_func``'s collector), which TRL hands over as
  ``sampling_per_token_logps``. When TRL left ``old_per_token_logps`` empty they become it,
  so the live PPO ratio is taken against exactly the recorded values, as ``train.py`` does;
* **TRL's own training forward** otherwise (``transformers`` generation inside the
  trainer). With one generation batch per optimizer step and ``num_iterations`` 1 (rules 2
  and 3 of docs/trl.md), TRL scores every row once, before the optimizer step, with the
  weights that generated it, and takes its ratio against those very values
  (``per_token_logps.detach()``). The recorder reads them there instead of running a
  second forward: the update is the one TRL makes without a recorder, bit for bit, and the
  recorded π_old is the one it used. TRL shuffles the generation batch and splits it into
  micro-batches (``shuffle_sequence_dict``, ``split_tensor_dict``), which permute every
  tensor of the batch in unison, so each row carries its index under :data:`ROW_KEY`.
  A loss that scores a recorded micro-batch without TRL's per-token forward (a subclass's
  own ``_compute_loss``) fails that micro-batch before its backward pass, so the optimizer
  step never runs on an unrecorded batch.

Dropout: TRL generates in training mode, so active dropout makes the sampling itself
random beyond the weights, and no forward reproduces what was sampled.
:func:`active_dropout` finds it; ``attach`` refuses it unless the sampler reports its own
log-probabilities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kiln_verify.errors import TrlRecordingFailed

__all__ = ["ROW_KEY", "TrainingForward", "active_dropout"]

ROW_KEY: Final = "kiln_row"
"""The key of the row-index tensor the recorder adds to TRL's generation batch."""


def active_dropout(model: Any) -> str | None:
    """The first place dropout is active in ``model``'s training mode, or ``None``: a
    dropout module with ``p`` > 0 (LoRA's ``lora_dropout`` is one), or a configuration's
    ``attention_dropout`` > 0 (applied functionally inside attention)."""
    from torch import nn

    modules = model.named_modules() if isinstance(model, nn.Module) else ()
    for name, module in modules:
        if isinstance(module, nn.modules.dropout._DropoutNd) and module.p > 0:
            return f"module {name or '<root>'} (p={module.p:g})"
    config = getattr(model, "config", None)
    seen: set[int] = set()
    while config is not None and id(config) not in seen:
        seen.add(id(config))
        rate = getattr(config, "attention_dropout", 0.0)
        if isinstance(rate, int | float) and rate > 0:
            return f"config attention_dropout={rate:g}"
        config = getattr(config, "text_config", None)
    return None


class TrainingForward:
    """Wraps a trainer's ``_compute_loss`` and ``_get_per_token_logps_and_entropies`` so the
    policy forward of a micro-batch carrying :data:`ROW_KEY` hands its per-token
    log-probabilities to ``sink(rows, logps)`` (see the module text)."""

    def __init__(self, trainer: Any, sink: Callable[[list[int], Any], None]) -> None:
        missing = [
            name
            for name in ("_compute_loss", "_get_per_token_logps_and_entropies")
            if not callable(getattr(trainer, name, None))
        ]
        if missing:
            raise TrlRecordingFailed(
                f"this TRL has no GRPOTrainer.{missing[0]}: the recorder reads the behaviour "
                "log-probabilities from it (TRL 1.16 has it)"
            )
        self._sink = sink
        self._scoring: tuple[Any, Any] | None = None
        self._loss = trainer._compute_loss
        self._logps = trainer._get_per_token_logps_and_entropies
        trainer._compute_loss = self._compute_loss
        trainer._get_per_token_logps_and_entropies = self._per_token_logps

    def _compute_loss(self, model: Any, inputs: Any) -> Any:
        rows = inputs.get(ROW_KEY) if isinstance(inputs, dict) else None
        if rows is None:
            return self._loss(model, inputs)
        self._scoring = (model, rows)
        try:
            loss = self._loss(model, inputs)
        finally:
            unscored, self._scoring = self._scoring, None
        if unscored is not None:
            raise TrlRecordingFailed(
                "TRL's loss scored a recorded micro-batch without its per-token forward (a "
                "custom _compute_loss?), so its behaviour log-probabilities cannot be "
                "recorded; the micro-batch failed before its backward pass and optimizer step"
            )
        return loss

    def _per_token_logps(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        result = self._logps(model, *args, **kwargs)
        scoring = self._scoring
        if scoring is not None and model is scoring[0]:  # the policy's, not a reference's
            self._scoring = None
            self._sink([int(row) for row in scoring[1].tolist()], result[0])
        return result
