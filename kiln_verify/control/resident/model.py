"""The resident model's weights, loaded once and shared by the policy of every adapter.

Nothing is loaded when the server starts: the first run that plays ``base`` or an
installed adapter loads the tokenizer and the base weights (float32, on the configured
device, eval mode), and an adapter's LoRA weights are attached the first time a run names
it, after the directory passes the installed-adapter verification again
(:func:`kiln_verify.hf.importer.verify_installed`). Every adapter is one more named PEFT
adapter on the same base model (``PeftModel.load_adapter``), so N adapters cost one copy
of the base weights.

Each adapter's policy is the ``transformers`` policy
(:meth:`~kiln_verify.openenv.policy.transformers_policy.TransformersPolicy.bound`) over a
view of the shared model: every forward call of the view takes the model's lock, selects
its adapter (``set_adapter``; for ``base``, ``disable_adapter()``) and runs. A generation's
KV cache is its own, and every forward of one generation selects the same adapter, so runs
on different adapters may interleave token by token and each still samples from exactly
its own weights. The identity each policy records is the one a policy built with
``adapter_dir`` records: the model directory's digests and the adapter's ``{name,
content_sha256}`` (here the verified import's content revision).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from kiln_verify.control.resident.names import check_adapter_name
from kiln_verify.control.sections.model import ModelSettings
from kiln_verify.errors import (
    KilnError,
    PolicyAdapterInvalid,
    PolicyGenerationFailed,
    PolicyUnavailable,
)
from kiln_verify.hf.importer import verify_installed
from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy

__all__ = ["ResidentModel"]


class _View:
    """The shared model as one adapter sees it: what the policy calls for each forward."""

    def __init__(self, owner: ResidentModel, key: str | None) -> None:
        self._owner = owner
        self._key = key

    @property
    def generation_config(self) -> Any:
        return self._owner.base.generation_config

    def __call__(self, **kwargs: Any) -> Any:
        owner = self._owner
        with owner.lock:
            model = owner.model
            if self._key is not None:
                model.set_adapter(self._key)
                return model(**kwargs)
            if owner.peft:
                with model.disable_adapter():
                    return model(**kwargs)
            return model(**kwargs)


class ResidentModel:
    """The resident model of one server: weights loaded on first use, a policy per adapter."""

    def __init__(self, settings: ModelSettings, adapters_root: os.PathLike[str] | str) -> None:
        self.settings = settings
        self.adapters_root = os.fspath(adapters_root)
        self.lock = threading.RLock()
        self.model: Any = None
        self.base: Any = None
        self.peft = False
        self._tokenizer: Any = None
        self._policies: dict[str, TransformersPolicy] = {}
        self._keys: dict[str, str] = {}
        self.load_errors: dict[str, str] = {}

    @property
    def loaded_adapters(self) -> list[str]:
        """Adapters whose weights are attached now."""
        with self.lock:
            return sorted(self._keys)

    def _load_base(self) -> None:
        if self.model is not None:
            return
        try:
            import torch
            import transformers
        except ImportError:
            raise PolicyUnavailable(
                "the resident model needs torch and transformers (the train extra)"
            ) from None
        path = self.settings.path
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            model: Any = transformers.AutoModelForCausalLM.from_pretrained(
                path, local_files_only=True, dtype=torch.float32
            )
        except Exception as exc:
            raise PolicyGenerationFailed(
                f"cannot load the resident model ({type(exc).__name__})", path=os.fspath(path)
            ) from None
        model.to(self.settings.device)
        model.eval()
        self._tokenizer, self.base, self.model = tokenizer, model, model

    def _attach(self, name: str) -> tuple[str, dict[str, str]]:
        """Verify the installed adapter ``name`` and attach its weights; (key, identity)."""
        directory = os.path.join(self.adapters_root, name)
        try:
            installed = verify_installed(directory, name=name)
        except KilnError as exc:
            # a directory changed since its import is never served (the run fails with
            # persisted_contract_invalid, as for any adapter that cannot be played)
            raise PolicyAdapterInvalid(
                f"installed adapter {name!r} fails verification ({exc.code}: {exc.rule})",
                path=directory,
                hint="install the adapter again under a new name through the verified import",
            ) from None
        identity = {"name": name, "content_sha256": "sha256:" + installed.content_revision}
        key = f"adapter{len(self._keys)}"  # PEFT adapter names may not contain '.'
        try:
            import peft
        except ImportError:
            raise PolicyUnavailable("serving an adapter needs the peft package") from None
        try:
            if not self.peft:
                self.model = peft.PeftModel.from_pretrained(
                    self.base, directory, adapter_name=key, is_trainable=False
                )
                self.peft = True
            else:
                self.model.load_adapter(directory, adapter_name=key, is_trainable=False)
            self.model.eval()
        except Exception as exc:
            raise PolicyAdapterInvalid(
                f"adapter {name!r} does not load onto the resident model "
                f"({type(exc).__name__}: {str(exc)[:200]})",
                path=directory,
            ) from None
        self._keys[name] = key
        return key, identity

    def policy(self, adapter: str, *, base_name: str) -> TransformersPolicy:
        """The ``transformers`` policy of ``adapter`` (``base_name``: the resident model
        itself), built once and shared by every run that names it. Blocking: the first
        call loads the weights."""
        with self.lock:
            cached = self._policies.get(adapter)
            if cached is not None:
                return cached
            self._load_base()
            key: str | None = None
            identity: dict[str, str] | None = None
            if adapter != base_name:
                check_adapter_name(adapter)
                try:
                    key, identity = self._attach(adapter)
                except KilnError as exc:
                    self.load_errors[adapter] = f"{exc.code}: {exc.rule}"[:1024]
                    raise
                self.load_errors.pop(adapter, None)
            policy = TransformersPolicy.bound(
                self.settings.path,
                _View(self, key),
                self._tokenizer,
                adapter=identity,
                device=self.settings.device,
                name=self.settings.served_model_id,
            )
            self._policies[adapter] = policy
            return policy
