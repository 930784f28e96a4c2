"""The effective GRPO configuration: one table from Kiln's ``GrpoConfig`` to this trainer.

This server trains with the recorded-GRPO bundle's own pinned runner
(:mod:`kiln_verify.hf.runner.train`, TRL's ``GRPOTrainer`` over the run's recorded corpus).
:data:`FIELDS` is the one source of truth for what each ``GrpoConfig`` field becomes there:
the TRL ``GRPOConfig`` argument (or PEFT ``LoraConfig`` / trainer argument) it sets, the
``train.py`` option that sets it, and the rule admission applies:

``honoured``   mapped onto TRL and ``train.py``; a value TRL cannot express is refused
``selection``  carried out by the run itself before export (§5.7 training selection)
``Kiln-owned`` set by admission from the request (§5.8); a different explicit value is
               refused rather than overridden behind the client's back
``default``    only Kiln's default is accepted: any other value is refused naming the field

:func:`read_training_config` refuses unknown keys (Kiln ignores them; this server never
does) and :func:`check_honoured` every value the table cannot carry out, both with
``openenv_training_config_unsupported`` naming the field, so nothing is silently dropped.
:func:`runner_options` turns an admitted configuration into ``train.py``'s arguments.
docs/training-admission.md renders the table and says where a *default* executes
differently from Kiln's (the KL estimator, ECHO, the learning-rate and seed defaults).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from kiln_verify.control.training.grpo_config import GrpoConfig
from kiln_verify.errors import ApiRequestInvalid, ApiTrainingConfigUnsupported, RecordInvalid
from kiln_verify.limits import MAX_LORA_RANK, MAX_TRAINER_SEED
from kiln_verify.records import validate_record

__all__ = [
    "FIELDS",
    "KILN_OWNED",
    "FieldRule",
    "check_honoured",
    "read_training_config",
    "runner_options",
]

Check = Callable[[Any, GrpoConfig], str | None]
"""``(value, config) -> None`` when honoured, else why not (the refusal's text)."""

_TORCH_ADAMW: Final = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
"""``adamw_torch``'s settings; the runner exposes only ``weight_decay``."""


@dataclasses.dataclass(frozen=True, slots=True)
class FieldRule:
    """One ``GrpoConfig`` field: where it goes and which values this trainer honours."""

    name: str
    trl: str
    option: str
    rule: str
    check: Check


def _default(value: Any, config: GrpoConfig) -> str | None:
    return None  # only reached for a non-default value: see check_honoured


def _refuse(why: str) -> Check:
    return lambda value, config: why


def _between(low: float, high: float | None, *, open_high: bool = False) -> Check:
    shown = f"[{low}, {'inf' if high is None else high}{')' if open_high else ']'}"

    def check(value: Any, config: GrpoConfig) -> str | None:
        if value is None:
            return None
        above = high is not None and (value >= high if open_high else value > high)
        return f"must be within {shown}" if value < low or above else None

    return check


def _learning_rate(value: Any, config: GrpoConfig) -> str | None:
    return None if value is None or value > 0 else "must be greater than zero"


def _lora_alpha(value: Any, config: GrpoConfig) -> str | None:
    if value >= 1 and float(value).is_integer():
        return None
    return "train.py takes a whole LoRA alpha of at least 1"


def _lora_rank(value: Any, config: GrpoConfig) -> str | None:
    return None if value <= MAX_LORA_RANK else f"exceeds MAX_LORA_RANK = {MAX_LORA_RANK}"


def _seed(value: Any, config: GrpoConfig) -> str | None:
    return None if value <= MAX_TRAINER_SEED else f"exceeds MAX_TRAINER_SEED = {MAX_TRAINER_SEED}"


def _is_level(value: Any, config: GrpoConfig) -> str | None:
    return "cispo is not a TRL importance-sampling level here" if value == "cispo" else None


def _kl_reference(value: Any, config: GrpoConfig) -> str | None:
    if value.kind == "ema":
        return "an EMA reference policy is not available in TRL's GRPOTrainer"
    kl_on = config.kl_coeff != 0 and config.kl_estimator != "none"
    if value.kind == "none" and kl_on:
        return "kind none requires kl_estimator none or kl_coeff 0"
    return None


def _optimizer(value: Any, config: GrpoConfig) -> str | None:
    if value.kind != "adam_w":
        return f"{value.kind} is not available; train.py runs adamw_torch"
    for name, torch_value in _TORCH_ADAMW.items():
        given = getattr(value, name)
        if given is not None and given != torch_value:
            return f"{name} must be adamw_torch's {torch_value} (train.py does not set it)"
    if value.weight_decay is not None and value.weight_decay < 0:
        return "weight_decay must not be negative"
    return None


def _loss(value: Any, config: GrpoConfig) -> str | None:
    if value.opd is not None:
        return "loss.opd is reserved by Kiln and not available"
    if value.no_policy_loss:
        return "loss.no_policy_loss needs ECHO, which this trainer does not run"
    if value.echo is not None and value.echo != type(value)().echo:
        return "ECHO is not run by this trainer; send loss.echo null to say so"
    return None


_H, _S, _K, _D = "honoured", "selection", "Kiln-owned", "default"
_NONE = "-"

FIELDS: Final[tuple[FieldRule, ...]] = (
    FieldRule("learning_rate", "learning_rate", "--learning-rate", _H, _learning_rate),
    FieldRule("kl_coeff", "beta", "--beta", _H, _between(0.0, None)),
    FieldRule("clip_epsilon", "epsilon", "--epsilon", _H, _between(0.0, 1.0, open_high=True)),
    FieldRule("clip_eps_high", "epsilon_high", "--epsilon-high", _H, _between(0.0, None)),
    FieldRule("cispo_max_weight", _NONE, _NONE, _D, _refuse("CISPO is not available")),
    FieldRule("advantage_mode", "scale_rewards", "--scale-rewards", _H, _default),
    FieldRule("loss_aggregation", "loss_type", "--loss-type", _H, _default),
    FieldRule("kl_estimator", "beta (k3 estimator)", "--beta", _H, _default),
    FieldRule(
        "dynamic_sampling",
        _NONE,
        _NONE,
        _S,
        _refuse("zero-variance groups are always skipped (§5.7)"),
    ),
    FieldRule(
        "is_level", "importance_sampling_level", "--importance-sampling-level", _H, _is_level
    ),
    FieldRule("behavior_policy", _NONE, _NONE, _K, _default),
    FieldRule(
        "kl_reference_policy", "ref model (the weights before training)", _NONE, _H, _kl_reference
    ),
    FieldRule("entropy_aware_kl_quantile", _NONE, _NONE, _D, _refuse("selective KL is absent")),
    FieldRule(
        "reward_saturation_threshold",
        _NONE,
        _NONE,
        _D,
        _refuse("reward-saturation diagnostics are not produced"),
    ),
    FieldRule(
        "reward_low_variance_threshold",
        _NONE,
        _NONE,
        _D,
        _refuse("reward-variance diagnostics are not produced"),
    ),
    FieldRule("reward_filter_var_min", _NONE, _NONE, _D, _refuse("no reward-variance filter")),
    FieldRule("reward_filter_var_max", _NONE, _NONE, _D, _refuse("no reward-variance filter")),
    FieldRule("reward_filter_min_groups", _NONE, _NONE, _D, _refuse("no reward-variance filter")),
    FieldRule("reward_filter_on_empty", _NONE, _NONE, _D, _refuse("no reward-variance filter")),
    FieldRule("lora_rank", "LoraConfig.r", "--lora-rank", _H, _lora_rank),
    FieldRule("lora_alpha", "LoraConfig.lora_alpha", "--lora-alpha", _H, _lora_alpha),
    FieldRule("base_adapter", "the exported input adapter", _NONE, _K, _default),
    FieldRule(
        "allow_adapter_shape_conversion",
        _NONE,
        _NONE,
        _D,
        _refuse("adapter shapes are never converted"),
    ),
    FieldRule("allow_high_lora_scale", _NONE, _NONE, _D, _refuse("no LoRA-scale override")),
    FieldRule("output_name", _NONE, _NONE, _K, _default),
    FieldRule("auto_load", _NONE, _NONE, _K, _default),
    FieldRule("checkpoint_interval", _NONE, _NONE, _D, _refuse("no periodic checkpoints")),
    FieldRule("resume_checkpoint", _NONE, _NONE, _D, _refuse("no resumable checkpoints")),
    FieldRule(
        "grad_checkpoint_segments",
        _NONE,
        _NONE,
        _D,
        _refuse("segments are not selectable"),
    ),
    FieldRule("detect_anomaly", _NONE, _NONE, _D, _refuse("no anomaly detection")),
    FieldRule("seed", "seed, data_seed", "--seed", _H, _seed),
    FieldRule("optimizer", "optim=adamw_torch, weight_decay", "--weight-decay", _H, _optimizer),
    FieldRule("adapter_smoke_test", _NONE, _NONE, _D, _refuse("no adapter smoke test")),
    FieldRule("adapter_smoke_prompts", _NONE, _NONE, _D, _refuse("no adapter smoke test")),
    FieldRule("shared_prefix_reference", "(same numbers either way)", _NONE, _H, _default),
    FieldRule("loss", "(policy loss only)", _NONE, _H, _loss),
)
KILN_OWNED: Final = frozenset(rule.name for rule in FIELDS if rule.rule == _K)

_NESTED: Final[Mapping[str, frozenset[str]]] = {
    "kl_reference_policy": frozenset({"kind", "decay", "refresh_every"}),
    "reference_policy": frozenset({"kind", "decay", "refresh_every"}),
    "optimizer": frozenset(
        {"kind", "beta1", "beta2", "eps", "momentum", "nesterov", "ns_iters", "weight_decay"}
    ),
    "loss": frozenset({"echo", "opd", "no_policy_loss"}),
}
_LOSS_PARTS: Final = {"echo": frozenset({"lambda", "env_mask_mode", "warning_filter"}),
                      "opd": frozenset({"lambda"})}  # fmt: skip
_KNOWN: Final = frozenset({rule.name for rule in FIELDS} | {"reference_policy"})


def _unknown(raw: Mapping[str, Any]) -> str | None:
    for key in raw:
        if key not in _KNOWN:
            return key
        inner = raw[key]
        if key in _NESTED and isinstance(inner, Mapping):
            for sub in inner:
                if sub not in _NESTED[key]:
                    return f"{key}.{sub}"
                part = inner[sub]
                if key == "loss" and sub in _LOSS_PARTS and isinstance(part, Mapping):
                    extra = next((k for k in part if k not in _LOSS_PARTS[sub]), None)
                    if extra is not None:
                        return f"loss.{sub}.{extra}"
    return None


def read_training_config(raw: Mapping[str, Any] | None) -> GrpoConfig:
    """The request's ``training_config`` as Kiln's record; unknown keys are refused."""
    if raw is None:
        return GrpoConfig()
    unknown = _unknown(raw)
    if unknown is not None:
        raise ApiTrainingConfigUnsupported(
            f"training_config.{unknown[:80]} is not a GrpoConfig field this server honours",
            fields=(f"training_config.{unknown[:80]}",),
        )
    try:
        return validate_record(GrpoConfig, dict(raw))
    except RecordInvalid as exc:
        raise ApiRequestInvalid(f"training_config: {exc.rule}") from None


def check_honoured(config: GrpoConfig) -> None:
    """Refuse the first field whose value this trainer cannot carry out (table order).

    A field at Kiln's default is never refused (docs say how each default executes); the
    Kiln-owned fields are the preflight's (:func:`~kiln_verify.control.training.preflight.
    effective_config`), which knows the request they come from.
    """
    default = GrpoConfig()
    for rule in FIELDS:
        value = getattr(config, rule.name)
        if rule.rule == _K or value == getattr(default, rule.name):
            continue
        why = rule.check(value, config)
        if why is not None:
            raise ApiTrainingConfigUnsupported(
                f"training_config.{rule.name}: {why}", fields=(f"training_config.{rule.name}",)
            )


def runner_options(config: GrpoConfig) -> list[str]:
    """``train.py``'s options for an admitted configuration (defaults left to the runner).

    With a behaviour adapter (``base_adapter``) the LoRA shape flags are left out: the
    exported input adapter is trained in its own shape and ``train.py`` refuses them next
    to it (admission refused a ``lora_rank``/``lora_alpha`` other than Kiln's default)."""
    kl_off = config.kl_estimator == "none"
    options = ["--beta", "0.0" if kl_off else repr(config.kl_coeff)]
    if config.learning_rate is not None:
        options += ["--learning-rate", repr(config.learning_rate)]
    options += ["--epsilon", repr(config.clip_epsilon)]
    if config.clip_eps_high is not None:
        options += ["--epsilon-high", repr(config.clip_eps_high)]
    options += ["--scale-rewards", "none" if config.advantage_mode == "dr_grpo" else "group"]
    options += ["--loss-type", "dapo" if config.loss_aggregation == "token_level" else "grpo"]
    options += ["--importance-sampling-level", config.is_level]
    if config.base_adapter is None:
        rank, alpha = str(config.lora_rank), str(int(config.lora_alpha))
        options += ["--lora-rank", rank, "--lora-alpha", alpha]
    if config.seed is not None:
        options += ["--seed", str(config.seed)]
    if config.optimizer.weight_decay is not None:
        options += ["--weight-decay", repr(config.optimizer.weight_decay)]
    return options
