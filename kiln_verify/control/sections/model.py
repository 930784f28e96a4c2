"""``[model]``: the server's resident model (``kiln-verify serve --model DIR`` sets ``path``).

::

    [model]
    path = "/models/Qwen3.5-0.8B"     # a local Hugging Face model directory
    served_model_id = "qwen3.5-0.8b"  # optional; default: config.json _name_or_path, else
                                      # the directory name (what `hf export` records)
    device = "cpu"                    # cpu | cuda | cuda:N

Kiln's ``[model]`` table also has ``model_id``, ``tokenizer_path`` and ``adapter_dir``; this
server reads the tokenizer from the model directory and keeps its adapters in
``<state_dir>/adapters/``, so those keys are refused by name rather than ignored
(docs/resident-model.md). Only the directory's existence is checked here: the weights are
loaded when a run first needs them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kiln_verify.control.sections.rules import fail, known_keys, table

__all__ = ["ModelSettings", "check_model_dir", "model_settings", "parse_model"]

_DEVICE: Final = re.compile(r"cpu|cuda(:[0-9]{1,3})?")
_MAX_SERVED_ID_CHARS: Final = 256


@dataclasses.dataclass(frozen=True, slots=True)
class ModelSettings:
    """The resident model: its directory, the id it is served and exported as, its device."""

    path: Path
    served_model_id: str | None = None
    device: str = "cpu"


def check_model_dir(path: Path, where: str, source: str | None) -> Path:
    """``path`` must be an existing directory holding ``config.json``; returned absolute,
    because the trainer child and the exporter run elsewhere (``serve --model ./m`` once
    handed ``train.py`` a ``--base-model m`` it could not find)."""
    if not path.is_dir():
        raise fail(f"{where}: the model directory {str(path)[:200]!r} does not exist", source)
    if not (path / "config.json").is_file():
        raise fail(
            f"{where}: {str(path)[:200]!r} has no config.json",
            source,
            hint="give a local Hugging Face model directory (config.json, tokenizer, weights)",
        )
    return path.absolute()


def parse_model(raw: Any, environ: Mapping[str, str], path: str | None) -> ModelSettings | None:
    """``[model]``, or ``None`` when the file has no such table (no resident model)."""
    if raw == {}:
        return None
    values = table(raw, "[model]", path)
    known_keys(values, {"path", "served_model_id", "device"}, "[model]", path)
    directory = values.get("path")
    if not isinstance(directory, str) or not directory:
        raise fail("[model].path must be a non-empty string (the model directory)", path)
    served = values.get("served_model_id")
    if served is not None and (
        not isinstance(served, str) or not 0 < len(served) <= _MAX_SERVED_ID_CHARS
    ):
        raise fail(f"[model].served_model_id must be 1..{_MAX_SERVED_ID_CHARS} characters", path)
    device = values.get("device", "cpu")
    if not isinstance(device, str) or not _DEVICE.fullmatch(device):
        raise fail("[model].device must be cpu, cuda or cuda:N", path)
    return ModelSettings(check_model_dir(Path(directory), "[model].path", path), served, device)


def model_settings(current: ModelSettings | None, directory: str) -> ModelSettings:
    """``serve --model DIR``: the file's ``[model]`` table (if any) with ``path = DIR``."""
    path = check_model_dir(Path(directory), "--model", None)
    if current is None:
        return ModelSettings(path)
    return dataclasses.replace(current, path=path)
