"""The live adapter's bytes at every recorded step, proven equal to PEFT's own save.

:func:`~kiln_verify.trl.identity.adapter_snapshot` runs PEFT's ``save_pretrained``: it
walks the whole model's state dict, writes two files into a temporary directory and reads
them back, 3 to 6 ms a step on the benchmark's tiny model (docs/performance.md, "TRL
recording overhead: third pass") and growing with the base model's module count, not the
adapter's size. Yet the weights file is only safetensors' serialization of the adapter's
tensors under PEFT's key names, and the config file does not change while the adapter's
configuration does not.

So :class:`AdapterReader` takes its first snapshot with PEFT and learns from it where each
saved tensor lives in the model (the module and attribute holding the live parameter,
found by storage identity), serializes those tensors with safetensors itself, and keeps
that plan only if the bytes equal PEFT's file exactly. Later snapshots read the same
attributes afresh and serialize them: a fraction of a millisecond. Before each, the plan
must still hold (the adapter configuration unchanged, every module still in place, every
tensor of the same shape and type); otherwise the snapshot is PEFT's again and the plan is
learned anew. Fail closed: a layout it cannot map, or bytes that differ, leave every later
snapshot to PEFT.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kiln_verify.trl.identity import AdapterSnapshot, adapter_snapshot

__all__ = ["AdapterReader"]

_FORMAT = {"format": "pt"}
"""The metadata PEFT writes into the weights file's header."""


@dataclass(frozen=True, slots=True)
class _Entry:
    key: str
    path: str
    module: Any
    attribute: str
    shape: tuple[int, ...]
    dtype: Any


def _configs(model: Any) -> dict[str, dict[str, Any]]:
    return {name: copy.deepcopy(vars(config)) for name, config in model.peft_config.items()}


class _Plan:
    """Where the saved tensors live, and the configuration they were learned under."""

    def __init__(self, entries: list[_Entry], configs: dict[str, Any], config: bytes) -> None:
        self.entries = entries
        self.configs = configs
        self.config = config

    @classmethod
    def learn(cls, model: Any, snapshot: AdapterSnapshot) -> _Plan | None:
        """The plan whose bytes equal ``snapshot`` (PEFT's save of ``model``), or None."""
        import torch
        from peft import get_peft_model_state_dict

        saved = get_peft_model_state_dict(model)
        live: dict[tuple[int, tuple[int, ...], Any], str] = {}
        for name, tensor in model.state_dict(keep_vars=True).items():
            if isinstance(tensor, torch.Tensor) and tensor.numel():
                live.setdefault((tensor.data_ptr(), tuple(tensor.shape), tensor.dtype), name)
        entries = []
        for key, tensor in saved.items():
            if not isinstance(tensor, torch.Tensor) or not tensor.numel():
                return None
            name = live.get((tensor.data_ptr(), tuple(tensor.shape), tensor.dtype))
            if name is None:  # a copy, not the live tensor: nothing to read later
                return None
            path, _, attribute = name.rpartition(".")
            module = model.get_submodule(path)
            entries.append(_Entry(key, path, module, attribute, tuple(tensor.shape), tensor.dtype))
        plan = cls(entries, _configs(model), snapshot.config)
        if plan.weights() != snapshot.weights:
            return None
        return plan

    def holds(self, model: Any) -> bool:
        """Whether ``model`` still has the adapter this plan was learned on."""
        import torch

        current = {name: vars(config) for name, config in model.peft_config.items()}
        if current != self.configs:
            return False
        for entry in self.entries:
            try:
                if model.get_submodule(entry.path) is not entry.module:
                    return False
            except AttributeError:
                return False
            tensor = getattr(entry.module, entry.attribute, None)
            if not isinstance(tensor, torch.Tensor):
                return False
            if tuple(tensor.shape) != entry.shape or tensor.dtype != entry.dtype:
                return False
        return True

    def weights(self) -> bytes:
        from safetensors.torch import save

        tensors = {
            entry.key: getattr(entry.module, entry.attribute).detach().contiguous()
            for entry in self.entries
        }
        data: bytes = save(tensors, metadata=_FORMAT)
        return data


class AdapterReader:
    """One trainer's adapter snapshots (see the module text)."""

    def __init__(self) -> None:
        self._plan: _Plan | None = None
        self._peft_only = False
        self.peft_snapshots = 0
        """How many snapshots were PEFT's own (the first, and any after a change)."""

    def snapshot(self, model: Any) -> AdapterSnapshot:
        """The adapter's config and weights files now, as PEFT would save them."""
        plan = self._plan
        if plan is not None and plan.holds(model):
            return AdapterSnapshot(plan.config, plan.weights())
        snapshot = adapter_snapshot(model)
        self.peft_snapshots += 1
        if not self._peft_only:
            self._plan = _Plan.learn(model, snapshot)
            self._peft_only = self._plan is None
        return snapshot
