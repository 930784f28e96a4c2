"""What both exports are made from: the model, its templates, an adapter, a split manifest.

``hf export-sft`` and ``hf export-grpo`` differ only in their data (an SFT file admitted
row by row, a recorded-GRPO corpus scanned as it is); the model side is the same five
options, read by the same rules in the same order. :class:`ExportSource` is those options
as one typed value (the command line builds it from its flags), and :meth:`ExportSource.
load` reads them: the model directory (:class:`~kiln_verify.hf.export.model_dir.
ModelSnapshot`), the TRL training template (``--training-template``, else derived from the
inference template) and its native twin, the split manifest (one JSON object) and the
input adapter (a real directory; its ``adapter_manifest.json``, if any, must name it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.core.digest import hash_file
from kiln_verify.core.jsonio import loads, loads_object
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import HfExportInvalid, HfTrainingTemplateUnderivable, UsageError
from kiln_verify.hf.export.model_dir import ModelSnapshot
from kiln_verify.hf.export.template import (
    check_training_template,
    derive_training_template,
    has_generation_blocks,
    native_training_template,
)
from kiln_verify.hf.grpo_scan import behaviour_adapter
from kiln_verify.hf.manifest import FileIdentity
from kiln_verify.hf.runner import environment_lock, reference_script
from kiln_verify.limits import (
    MAX_ADAPTER_CONFIG_BYTES,
    MAX_CHAT_TEMPLATE_BYTES,
    MAX_MODEL_FILE_BYTES,
    MAX_SPLIT_MANIFEST_BYTES,
)

__all__ = ["ExportSource", "InputAdapter", "LoadedSource"]

StrPath = str | os.PathLike[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportSource:
    """The model side of an export (``--model``, ``--training-template``,
    ``--input-adapter``, ``--served-model-id``, ``--split-manifest``); nothing is read
    until :meth:`load`, so the export's own target checks still come first."""

    model: StrPath
    training_template: StrPath | None = None
    input_adapter: StrPath | None = None
    served_model_id: str | None = None
    split_manifest: StrPath | None = None

    def load(self) -> LoadedSource:
        """Read and check everything, in the order the exports always have: the model
        directory, the training template, the split manifest, the input adapter."""
        snapshot = ModelSnapshot.read(self.model, served_model_id=self.served_model_id)
        trl, native = _templates(snapshot, self.training_template)
        split = _split_manifest(self.split_manifest)
        adapter = _input_adapter(self.input_adapter)
        return LoadedSource(snapshot, trl, native, split, adapter)


@dataclass(frozen=True)
class InputAdapter:
    """An ``--input-adapter`` directory: its name and the files the bundle copies."""

    name: str
    files: dict[str, Path]

    def behaviour_identity(self) -> dict[str, str]:
        def ident(relative: str) -> FileIdentity:
            found = hash_file(self.files[relative], max_bytes=MAX_MODEL_FILE_BYTES)
            return FileIdentity(
                relative_path=relative, size_bytes=found.size_bytes, sha256=str(found.sha256)
            )

        return behaviour_adapter(
            self.name,
            ident("input_adapter/adapter_model.safetensors"),
            ident("input_adapter/adapter_config.json"),
        )


@dataclass(frozen=True, slots=True)
class LoadedSource:
    """An :class:`ExportSource` read: the bytes and identities both exports write."""

    snapshot: ModelSnapshot
    trl: bytes
    """The TRL training template (``{% generation %}`` blocks)."""
    native: bytes
    """The native training template derived from it."""
    split: bytes | None
    adapter: InputAdapter | None

    def files(self) -> dict[str, bytes | Path]:
        """Every bundle file but the data: model side, templates, runner, lock, extras."""
        files: dict[str, bytes | Path] = {
            "kiln_model_config.json": self.snapshot.model_config,
            "tokenizer.json": self.snapshot.tokenizer,
            "chat_template.jinja": self.snapshot.chat_template,
            "kiln_training_chat_template.jinja": self.native,
            "training_chat_template.jinja": self.trl,
            "train.py": reference_script().data,
            "requirements.lock": environment_lock().data,
        }
        if self.split is not None:
            files["split_manifest.json"] = self.split
        if self.adapter is not None:
            files.update(self.adapter.files)
        return files


def _read_small(path: StrPath, max_bytes: int, what: str) -> bytes:
    with open_regular(path) as fd, os.fdopen(os.dup(fd), "rb") as stream:
        data = stream.read(max_bytes + 1)
    if not data or len(data) > max_bytes:
        raise HfExportInvalid(f"{what} is empty or larger than {max_bytes} bytes", path=str(path))
    return data


def _templates(snapshot: ModelSnapshot, training_template: StrPath | None) -> tuple[bytes, bytes]:
    """(TRL template, native template) bytes."""
    try:
        inference = snapshot.chat_template.decode("utf-8")
    except UnicodeDecodeError:
        raise HfExportInvalid("the chat template is not UTF-8") from None
    if training_template is None:
        trl = derive_training_template(inference)
    else:
        raw = _read_small(training_template, MAX_CHAT_TEMPLATE_BYTES, "--training-template")
        try:
            trl = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise HfTrainingTemplateUnderivable(
                "--training-template is not UTF-8", path=str(training_template)
            ) from None
        if not has_generation_blocks(trl):
            raise HfTrainingTemplateUnderivable(
                "--training-template has no {% generation %} ... {% endgeneration %} blocks",
                path=str(training_template),
            )
        check_training_template(trl, inference, derived=False)
    return trl.encode("utf-8"), native_training_template(trl).encode("utf-8")


def _input_adapter(directory: StrPath | None) -> InputAdapter | None:
    if directory is None:
        return None
    root = Path(directory)
    if not root.is_dir() or root.is_symlink():
        raise HfExportInvalid("--input-adapter is not a real directory", path=str(root))
    name = root.resolve().name
    files = {
        "input_adapter/adapter_config.json": root / "adapter_config.json",
        "input_adapter/adapter_model.safetensors": root / "adapter_model.safetensors",
    }
    config = _read_small(
        files["input_adapter/adapter_config.json"], MAX_ADAPTER_CONFIG_BYTES, "adapter_config.json"
    )
    loads_object(
        config, max_bytes=MAX_ADAPTER_CONFIG_BYTES, source=str(root / "adapter_config.json")
    )
    manifest = root / "adapter_manifest.json"
    if os.path.lexists(manifest):
        raw = _read_small(manifest, MAX_ADAPTER_CONFIG_BYTES, "adapter_manifest.json")
        value = loads_object(raw, max_bytes=MAX_ADAPTER_CONFIG_BYTES, source=str(manifest))
        recorded = value.get("adapter_name", name)
        if recorded != name:
            raise HfExportInvalid(
                f"adapter_manifest.json names adapter {str(recorded)[:80]!r}, "
                f"the directory is {name!r}",
                path=str(manifest),
            )
        files["input_adapter/adapter_manifest.json"] = manifest
    return InputAdapter(name, files)


def _split_manifest(path: StrPath | None) -> bytes | None:
    if path is None:
        return None
    data = _read_small(path, MAX_SPLIT_MANIFEST_BYTES, "--split-manifest")
    if not isinstance(loads(data, max_bytes=MAX_SPLIT_MANIFEST_BYTES, source=str(path)), dict):
        raise UsageError("--split-manifest must hold one JSON object", path=str(path))
    return data
