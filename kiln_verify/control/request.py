"""The control plane's request records: ``OpenEnvRunRequest`` and the inspect/tasks bodies.

Field names, order, defaults and the ``environments`` alias follow the published
control-plane schema (ericflo/kiln ``contracts/kiln-control-plane-v1.schema.json``) and
kiln-openenv-contract §12; docs/control-plane.md says where the two disagree and which
one this server follows.

A request record is always *normalized*: omitted fields hold their defaults, the
``environments`` alias is resolved, integer spellings of float fields become floats,
``base``/``none``/``null`` adapters become ``base``, and empty optional lists are absent.
Two requests mean the same run exactly when their :meth:`OpenEnvRunRequest.to_json` values
are equal, which is the idempotency comparison (§12: "compare by effective meaning").
Environment URLs are normalized separately, by :func:`kiln_verify.control.admission`
before comparison, because an invalid one has its own error code.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    AliasChoices,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from kiln_verify.limits import (
    MAX_CREDENTIAL_HANDLE_CHARS,
    MAX_ENVIRONMENTS,
    MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_TASK_PAGE,
)
from kiln_verify.records import FreeObject, Record

__all__ = [
    "BASE_ADAPTER",
    "CREDENTIAL_HANDLE_PATTERN",
    "IDEMPOTENCY_KEY_PATTERN",
    "TRAIN_ONLY_FIELDS",
    "InspectRequest",
    "OpenEnvRunRequest",
    "RunKind",
    "TaskCatalogRequest",
]

RunKind = Literal["rollout", "train"]
BASE_ADAPTER: Final = "base"
IDEMPOTENCY_KEY_PATTERN: Final = rf"^[A-Za-z0-9._:-]{{1,{MAX_IDEMPOTENCY_KEY_BYTES}}}$"
CREDENTIAL_HANDLE_PATTERN: Final = rf"^[A-Za-z0-9_-]{{1,{MAX_CREDENTIAL_HANDLE_CHARS}}}$"
_ADAPTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
TRAIN_ONLY_FIELDS: Final = ("output_adapter", "training_config", "post_eval", "environment_eval")
"""Fields only ``kind=train`` may carry; a rollout request with one is refused (§12)."""


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("must be finite")
    return number


Number = Annotated[float, PlainValidator(_number), WithJsonSchema({"type": "number"})]
"""A finite JSON number; ``1`` and ``1.0`` are the same value (Rust ``f32``/``f64``)."""

Positive = Annotated[StrictInt, Field(ge=1, le=2**64 - 1)]
NonNegative = Annotated[StrictInt, Field(ge=0, le=2**64 - 1)]
Url = Annotated[StrictStr, Field(min_length=1)]
Handle = Annotated[StrictStr, Field(pattern=CREDENTIAL_HANDLE_PATTERN)]
IdempotencyKey = Annotated[StrictStr, Field(pattern=IDEMPOTENCY_KEY_PATTERN)]
_URLS_ALIAS = AliasChoices("environment_urls", "environments")


def _one_url_key(data: Any) -> Any:
    if isinstance(data, dict) and "environment_urls" in data and "environments" in data:
        raise ValueError("give environment_urls or its alias environments, not both")
    return data


def _empty_to_none(value: list[Any] | None) -> list[Any] | None:
    return value or None


def _check_credentials(credential_ids: list[str | None] | None, urls: list[str]) -> None:
    if credential_ids is not None and "-" in credential_ids:
        raise ValueError("a credential handle is never '-' (use null for a public slot)")
    if credential_ids is not None and len(credential_ids) != len(urls):
        raise ValueError(
            "credential_ids must be empty or hold one handle (or null) per environment URL"
        )


class _Targets(Record):
    """``environment_urls`` (alias ``environments``) and aligned ``credential_ids``."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"credential_ids"})

    environment_urls: Annotated[list[Url], Field(min_length=1, max_length=MAX_ENVIRONMENTS)] = (
        Field(validation_alias=_URLS_ALIAS, serialization_alias="environment_urls")
    )
    credential_ids: list[Handle | None] | None = None

    @model_validator(mode="before")
    @classmethod
    def _alias_once(cls, data: Any) -> Any:
        return _one_url_key(data)

    @field_validator("credential_ids", mode="after")
    @classmethod
    def _no_empty_list(cls, value: list[str | None] | None) -> list[str | None] | None:
        return _empty_to_none(value)

    @model_validator(mode="after")
    def _aligned(self) -> _Targets:
        _check_credentials(self.credential_ids, self.environment_urls)
        return self


class InspectRequest(_Targets):
    """``POST /v1/openenv/inspect``: discover one or more OpenEnv servers."""


class TaskCatalogRequest(_Targets):
    """``POST /v1/openenv/tasks``: Task API splits and optionally one bounded page."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"credential_ids", "environment_name", "split"}
    )

    environment_name: Annotated[StrictStr, Field(min_length=1)] | None = None
    split: Annotated[StrictStr, Field(min_length=1)] | None = None
    start: NonNegative = 0
    limit: Annotated[StrictInt, Field(ge=1, le=MAX_TASK_PAGE)] = 50


class OpenEnvRunRequest(Record):
    """A persisted rollout (or, refused here, rollout-and-train) request (§12)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {
            "idempotency_key",
            "credential_ids",
            "environment_reset_options",
            "thinking_budget_tokens",
            *TRAIN_ONLY_FIELDS,
        }
    )

    kind: RunKind = "rollout"
    idempotency_key: IdempotencyKey | None = None
    environment_urls: Annotated[list[Url], Field(min_length=1, max_length=MAX_ENVIRONMENTS)] = (
        Field(validation_alias=_URLS_ALIAS, serialization_alias="environment_urls")
    )
    credential_ids: list[Handle | None] | None = None
    adapter: StrictStr = BASE_ADAPTER
    groups: Positive = 8
    group_size: Positive = 4
    seed_start: NonNegative = 0
    reset_options: FreeObject = Field(default_factory=dict)
    environment_reset_options: list[FreeObject] | None = None
    max_steps: Positive = 8
    concurrency: Positive = 4
    max_action_tokens: Positive = 256
    thinking_budget_tokens: NonNegative | None = None
    temperature: Number = 1.0
    thinking: StrictBool = True
    protocol_error_reward: Number = -1.0
    max_recoverable_errors: NonNegative = 3
    capacity_wait_seconds: Positive = 300
    output_adapter: Annotated[StrictStr, Field(min_length=1)] | None = None
    training_config: FreeObject | None = None
    auto_load: StrictBool = True
    post_eval: FreeObject | None = None
    environment_eval: FreeObject | None = None

    @model_validator(mode="before")
    @classmethod
    def _alias_once(cls, data: Any) -> Any:
        return _one_url_key(data)

    @field_validator("credential_ids", "environment_reset_options", mode="after")
    @classmethod
    def _no_empty_list(cls, value: list[Any] | None) -> list[Any] | None:
        return _empty_to_none(value)

    @field_validator("adapter", mode="after")
    @classmethod
    def _adapter(cls, value: str) -> str:
        text = value.strip()
        if text.lower() in ("base", "none", "null"):
            return BASE_ADAPTER
        if not _ADAPTER.fullmatch(text):
            raise ValueError(
                "must be base/none/null or an adapter name of 1..128 letters, digits, '.', "
                "'_' or '-' starting with a letter or digit"
            )
        return text

    @model_validator(mode="after")
    def _aligned(self) -> OpenEnvRunRequest:
        _check_credentials(self.credential_ids, self.environment_urls)
        per_environment = self.environment_reset_options
        if per_environment is not None:
            if len(per_environment) != len(self.environment_urls):
                raise ValueError(
                    "environment_reset_options must hold exactly one object per environment URL"
                )
            if self.reset_options:
                raise ValueError(
                    "reset_options and environment_reset_options are mutually exclusive"
                )
        return self

    def train_only_fields(self) -> list[str]:
        """The training-only fields this request carries (refused for ``kind=rollout``)."""
        return [name for name in TRAIN_ONLY_FIELDS if getattr(self, name) is not None]

    def reset_templates(self) -> list[dict[str, Any]]:
        """One reset template per environment (the shared object repeated)."""
        if self.environment_reset_options is not None:
            return [dict(item) for item in self.environment_reset_options]
        return [dict(self.reset_options) for _ in self.environment_urls]
