"""The training result ``kiln_hf_result.json`` = ``kiln.hf-trl-result.v1`` (§4.4, §3.5).

Trainer settings are tagged values ``{"kind", "value"}`` so that no float crosses the
boundary: a ``decimal`` is the exact text the user gave (``"2e-5"``), which Rust and
Python digest identically.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Final, Literal, Self

from pydantic import Field, PlainValidator, StrictBool, StrictInt, WithJsonSchema, model_validator

from kiln_verify.core.jsonio import dumps_canonical
from kiln_verify.hf.manifest.export import ExportManifest, Task
from kiln_verify.hf.manifest.fields import (
    BoundedText,
    FileIdentity,
    SealedDocument,
    Sha256,
    at,
    bounded_text,
)
from kiln_verify.limits import (
    MAX_EFFECTIVE_CONFIG_BYTES,
    MAX_EFFECTIVE_CONFIG_ENTRIES,
    MAX_HF_TEXT_BYTES,
)
from kiln_verify.records import Record

__all__ = [
    "RESULT_MANIFEST",
    "BooleanValue",
    "ConfigValue",
    "DecimalValue",
    "IntegerValue",
    "OutputAdapter",
    "TextListValue",
    "TextValue",
    "TrainerInfo",
    "TrainingResult",
    "UnsignedValue",
    "config_value",
]

RESULT_MANIFEST: Final = "kiln.hf-trl-result.v1"
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _decimal(value: Any) -> str:
    text = bounded_text(value)
    if not _DECIMAL.fullmatch(text) or not math.isfinite(float(text)):
        raise ValueError("must be the exact text of a finite decimal number")
    return text


DecimalText = Annotated[
    str,
    PlainValidator(_decimal),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_HF_TEXT_BYTES}),
]


class BooleanValue(Record):
    kind: Literal["boolean"] = "boolean"
    value: StrictBool


class IntegerValue(Record):
    kind: Literal["integer"] = "integer"
    value: Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]


class UnsignedValue(Record):
    kind: Literal["unsigned"] = "unsigned"
    value: Annotated[StrictInt, Field(ge=0, le=2**64 - 1)]


class DecimalValue(Record):
    kind: Literal["decimal"] = "decimal"
    value: DecimalText


class TextValue(Record):
    kind: Literal["text"] = "text"
    value: BoundedText


class TextListValue(Record):
    kind: Literal["text_list"] = "text_list"
    value: list[BoundedText] = Field(max_length=MAX_EFFECTIVE_CONFIG_ENTRIES)


ConfigValue = Annotated[
    BooleanValue | IntegerValue | UnsignedValue | DecimalValue | TextValue | TextListValue,
    Field(discriminator="kind"),
]
"""One tagged effective-configuration value (§3.5)."""


def config_value(value: bool | int | str | list[str], *, kind: str | None = None) -> Any:
    """Tag a Python value: bool → boolean, int ≥ 0 → unsigned (else integer), list → text_list,
    str → text; ``kind="decimal"`` (or ``"integer"``) chooses explicitly."""
    classes: dict[str, Any] = {
        "boolean": BooleanValue,
        "integer": IntegerValue,
        "unsigned": UnsignedValue,
        "decimal": DecimalValue,
        "text": TextValue,
        "text_list": TextListValue,
    }
    if kind is None:
        if isinstance(value, bool):
            kind = "boolean"
        elif isinstance(value, int):
            kind = "unsigned" if value >= 0 else "integer"
        elif isinstance(value, list):
            kind = "text_list"
        else:
            kind = "text"
    return classes[kind](value=value)


def _config_key(value: Any) -> str:
    return bounded_text(value)


ConfigKey = Annotated[str, PlainValidator(_config_key)]

ScriptFile = Annotated[FileIdentity, at("executed_train.py")]
AdapterConfigFile = Annotated[FileIdentity, at("adapter_config.json")]
AdapterWeightsFile = Annotated[FileIdentity, at("adapter_model.safetensors")]


class TrainerInfo(Record):
    """Which trainer ran, the package versions it reported and the executed script."""

    kind: Literal["trl_sft_trainer", "trl_grpo_trainer"]
    python_version: BoundedText
    torch_version: BoundedText
    transformers_version: BoundedText
    trl_version: BoundedText
    peft_version: BoundedText
    script: ScriptFile


class OutputAdapter(Record):
    config: AdapterConfigFile
    model: AdapterWeightsFile


_TRAINERS: Final = {"sft": "trl_sft_trainer", "grpo": "trl_grpo_trainer"}


class TrainingResult(SealedDocument):
    """``kiln.hf-trl-result.v1``, written last by the trainer; binds the export digest."""

    _digest_field: ClassVar[str] = "result_sha256"
    _document_tag: ClassVar[dict[str, Any]] = {
        "schema_version": 1,
        "result_type": RESULT_MANIFEST,
    }

    schema_version: Literal[1] = 1
    result_type: Literal["kiln.hf-trl-result.v1"] = RESULT_MANIFEST
    export_sha256: Sha256
    task: Task
    trainer: TrainerInfo
    effective_config: dict[ConfigKey, ConfigValue] = Field(
        min_length=1, max_length=MAX_EFFECTIVE_CONFIG_ENTRIES
    )
    output_adapter: OutputAdapter
    result_sha256: Sha256

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if self.trainer.kind != _TRAINERS[self.task]:
            raise ValueError(f"task {self.task!r} requires trainer.kind {_TRAINERS[self.task]!r}")
        config = {key: value.to_json() for key, value in self.effective_config.items()}
        if len(dumps_canonical(config)) > MAX_EFFECTIVE_CONFIG_BYTES:
            raise ValueError(
                f"effective_config exceeds {MAX_EFFECTIVE_CONFIG_BYTES} canonical bytes"
            )
        return self

    def uses_reference_script(self, export: ExportManifest) -> bool:
        """Whether the executed script is byte-identical to the exported ``train.py``."""
        return self.trainer.script.sha256 == export.reference_script.sha256
