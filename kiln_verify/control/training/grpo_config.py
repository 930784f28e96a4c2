"""Kiln's ``GrpoConfig`` and the objects it holds, field for field and default for default.

The field list, order, types and input alias are the published control-plane schema's
(ericflo/kiln ``contracts/kiln-control-plane-v1.schema.json`` @7b449586, ``GrpoConfig``);
the defaults are those of ``kiln_train::GrpoConfig::default()`` (``crates/kiln-train/src/
lib.rs``): a record read from ``{}`` is Kiln's default configuration, and its
:meth:`~kiln_verify.records.Record.to_json` is what Kiln serializes (``resume_checkpoint``
and ``grad_checkpoint_segments`` omitted when unset, every other unset option ``null``).

Kiln's schema marks ``GrpoConfig``, ``LossConfig``, ``EchoConfig`` and the KL reference
policy *open* (unknown keys "accepted and ignored"): these records read such documents the
same way, so a Kiln status or summary is never refused for a key a newer Kiln adds. This
server's admission does not ignore them: :mod:`kiln_verify.control.training.effective`
refuses every key it does not know before the record is read (``openenv_training_config_
unsupported``), so nothing a client sends is silently dropped.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    model_validator,
)

from kiln_verify.control.request import Number, Positive
from kiln_verify.records import U64, Record

__all__ = [
    "DEFAULT_ECHO_LAMBDA",
    "OPTIMIZER_SETTINGS",
    "EchoConfig",
    "GrpoConfig",
    "KlReferencePolicy",
    "LossConfig",
    "OpdAuxConfig",
    "Optimizer",
]

DEFAULT_ECHO_LAMBDA: Final = 0.05
"""ECHO's mixing coefficient when ``loss.echo`` is not given (Kiln: on, paper §3.3)."""

OPTIMIZER_SETTINGS: Final[dict[str, frozenset[str]]] = {
    "sgd": frozenset(),
    "adam_w": frozenset({"beta1", "beta2", "eps", "weight_decay"}),
    "muon": frozenset({"momentum", "nesterov", "ns_iters", "weight_decay"}),
}
"""Kiln's ``Optimizer`` oneOf: the settings each optimizer accepts (others are refused)."""

_OPEN = ConfigDict(extra="ignore")
_Unit = Annotated[float, Field(ge=0.0, le=1.0)]
_Text = Annotated[StrictStr, Field(min_length=1)]


def _absent(value: Any) -> bool:
    return value is None


def _echo_on() -> EchoConfig | None:
    return EchoConfig.model_validate({})


class Optimizer(Record):
    """``kiln_train::Optimizer``: ``sgd``, ``adam_w`` (the default) or ``muon``; a setting
    the chosen optimizer does not take is refused (Kiln's oneOf branches are closed)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"beta1", "beta2", "eps", "momentum", "nesterov", "ns_iters", "weight_decay"}
    )

    kind: Literal["sgd", "adam_w", "muon"] = "adam_w"
    beta1: Number | None = None
    beta2: Number | None = None
    eps: Number | None = None
    momentum: Number | None = None
    nesterov: StrictBool | None = None
    ns_iters: U64 | None = None
    weight_decay: Number | None = None

    @model_validator(mode="after")
    def _settings_of_kind(self) -> Optimizer:
        given = {name for name in self._omit_when_none if getattr(self, name) is not None}
        extra = given - OPTIMIZER_SETTINGS[self.kind]
        if extra:
            raise ValueError(f"optimizer {self.kind} takes no {', '.join(sorted(extra))}")
        return self

    def settings(self) -> dict[str, Any]:
        """The settings given explicitly (the rest are the optimizer's own defaults)."""
        return {k: v for k, v in self.to_json().items() if k != "kind"}


class KlReferencePolicy(Record):
    """``kiln_train::KlReferencePolicy``: the frozen policy of the KL term only."""

    model_config = _OPEN
    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"decay", "refresh_every"})

    kind: Literal["base_per_step", "none", "ema"] = "base_per_step"
    decay: Number | None = None
    refresh_every: Positive | None = None

    @model_validator(mode="after")
    def _ema_defaults(self) -> KlReferencePolicy:
        if self.kind == "ema":  # Kiln's serde defaults: decay 0.0, refresh_every 32
            decay = 0.0 if self.decay is None else self.decay
            refresh = 32 if self.refresh_every is None else self.refresh_every
            object.__setattr__(self, "decay", decay)
            object.__setattr__(self, "refresh_every", refresh)
        else:  # Kiln's other variants carry no settings (extra keys are ignored)
            object.__setattr__(self, "decay", None)
            object.__setattr__(self, "refresh_every", None)
        return self


class EchoConfig(Record):
    """``kiln_train::EchoConfig``: the auxiliary environment cross-entropy term."""

    model_config = _OPEN

    # Kiln's field is `lambda`, a Python keyword: the attribute is `lambda_`
    lambda_: Number = Field(DEFAULT_ECHO_LAMBDA, alias="lambda")
    env_mask_mode: Literal["env_only", "full_obs"] = "env_only"
    warning_filter: StrictBool = True


class OpdAuxConfig(Record):
    """``kiln_train::OpdAuxConfig``: the reserved on-policy distillation term."""

    model_config = _OPEN

    lambda_: Number = Field(0.0, alias="lambda")


class LossConfig(Record):
    """``kiln_train::LossConfig``: ECHO on by default (``echo: null`` turns it off)."""

    model_config = _OPEN

    echo: EchoConfig | None = Field(default_factory=_echo_on)
    opd: OpdAuxConfig | None = None
    no_policy_loss: StrictBool = False


class GrpoConfig(Record):
    """``kiln_train::GrpoConfig`` (see the module docstring): Kiln's order and defaults."""

    model_config = _OPEN

    learning_rate: Number | None = None
    kl_coeff: Number = 0.1
    clip_epsilon: Number = 0.2
    clip_eps_high: Number | None = None
    cispo_max_weight: Number = 5.0
    advantage_mode: Literal["vanilla", "dr_grpo"] = "dr_grpo"
    loss_aggregation: Literal["per_sample", "token_level"] = "token_level"
    kl_estimator: Literal["k1", "k3", "none"] = "k1"
    dynamic_sampling: StrictBool = True
    is_level: Literal["token", "sequence", "cispo"] = "token"
    behavior_policy: Literal["no_importance_correction", "recorded"] = "no_importance_correction"
    kl_reference_policy: KlReferencePolicy = Field(
        default_factory=KlReferencePolicy,
        validation_alias=AliasChoices("kl_reference_policy", "reference_policy"),
        serialization_alias="kl_reference_policy",
    )
    entropy_aware_kl_quantile: _Unit | None = None
    reward_saturation_threshold: Number = 0.95
    reward_low_variance_threshold: Number = 1e-4
    reward_filter_var_min: Number | None = None
    reward_filter_var_max: Number | None = None
    reward_filter_min_groups: Positive = 1
    reward_filter_on_empty: Literal["fail", "train-all", "skip"] = "fail"
    lora_rank: Positive = 16
    lora_alpha: Number = 32.0
    base_adapter: StrictStr | None = None
    allow_adapter_shape_conversion: StrictBool = False
    allow_high_lora_scale: StrictBool = False
    output_name: StrictStr | None = None
    auto_load: StrictBool = True
    checkpoint_interval: Positive | None = None
    resume_checkpoint: StrictStr | None = Field(default=None, exclude_if=_absent)
    grad_checkpoint_segments: Positive | None = Field(default=None, exclude_if=_absent)
    detect_anomaly: StrictBool = False
    seed: U64 | None = None
    optimizer: Optimizer = Field(default_factory=Optimizer)
    adapter_smoke_test: StrictBool = False
    adapter_smoke_prompts: Annotated[list[_Text], Field(min_length=1)] | None = None
    shared_prefix_reference: StrictBool = True
    loss: LossConfig = Field(default_factory=LossConfig)

    @model_validator(mode="before")
    @classmethod
    def _alias_once(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kl_reference_policy" in data and "reference_policy" in data:
            raise ValueError("give kl_reference_policy or its alias reference_policy, not both")
        return data
