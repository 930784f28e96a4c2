"""Training admission of a preflight body: from the request to Kiln's receipt (a `kind=train`
run request is admitted by the same rules in its run kind, `control.kinds.train_admission`).

:func:`preflight` answers ``POST /v1/openenv/training/preflight`` exactly as §5.8 states:
the request rules (:mod:`~kiln_verify.control.training.rules`), the GRPO configuration read
and checked against the trainer (:mod:`~kiln_verify.control.training.effective`), Kiln's
owned overrides (:func:`effective_config`), the behaviour policy's identity and a capacity
snapshot of the server's run tracker, with ``capacity_reserved: false``. A refusal is a
typed :class:`~kiln_verify.errors.ControlApiError`; admission itself never contacts an
environment and never writes a file (the tests point a request at a port that records
connections and compare the state directory before and after).

Which policy plays the behaviour adapter is a :class:`BehaviourSource`: on the server,
:class:`ResidentBehaviour`, the resident model (``serve --model``; without one, admission
answers ``model_not_loaded``) playing ``base`` or an installed adapter; an application may
put another source on ``app.state`` under :data:`BEHAVIOUR_STATE_KEY`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final, Protocol

from kiln_verify.control.admission import parse_body
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.request import BASE_ADAPTER
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.control.training import rules
from kiln_verify.control.training.effective import check_honoured, read_training_config
from kiln_verify.control.training.grpo_config import GrpoConfig
from kiln_verify.control.training.records import (
    PREFLIGHT_SCHEMA,
    OpenEnvTrainingCapacitySnapshot,
    OpenEnvTrainingPreflightReceipt,
    OpenEnvTrainingPreflightRequest,
)
from kiln_verify.errors import (
    ApiAdapterUnknown,
    ApiCapacityFull,
    ApiTrainingConfigUnsupported,
    snippet,
)
from kiln_verify.records import validate_record
from kiln_verify.records.policy import BehaviorPolicyIdentity

__all__ = [
    "BEHAVIOUR_STATE_KEY",
    "BehaviourSource",
    "ResidentBehaviour",
    "capacity_snapshot",
    "effective_config",
    "preflight",
]

BEHAVIOUR_STATE_KEY: Final = "training_behaviour"
"""``app.state`` attribute holding a :class:`BehaviourSource` that replaces the default
:class:`ResidentBehaviour` (tests and embedding applications)."""

NO_IMPORTANCE_CORRECTION: Final = "no_importance_correction"


class BehaviourSource(Protocol):
    """Who plays an adapter, and which adapters are installed (never overwritten)."""

    async def behaviour(self, adapter: str) -> BehaviorPolicyIdentity:
        """The identity of the policy playing ``adapter``, or ``openenv_adapter_unknown``."""
        ...

    def installed(self) -> Collection[str]:
        """The adapter names an output adapter may not take."""
        ...


class ResidentBehaviour:
    """The resident model's adapters: the behaviour policy of a training run is the resident
    model playing ``base`` or an installed adapter (what its trainer warm-starts from), the
    same policy a rollout of that adapter uses (docs/resident-model.md). Constructed only
    on a server with a resident model (``model_not_loaded`` otherwise)."""

    def __init__(self, config: ServerConfig) -> None:
        require_resident_model(config, "training admission")
        self.config = config

    async def behaviour(self, adapter: str) -> BehaviorPolicyIdentity:
        from kiln_verify.control.resident.serving import served_policy

        policy = await served_policy(self.config, adapter)
        if policy is None:
            raise ApiAdapterUnknown(
                f"adapter {snippet(adapter)} is neither base nor installed on the resident model"
            )
        try:
            identity = policy.identity().rollout_identity()
        finally:
            await policy.aclose()
        return validate_record(BehaviorPolicyIdentity, identity)

    def installed(self) -> Collection[str]:
        from kiln_verify.control.resident.store import adapters_root, listed_names

        return frozenset(listed_names(adapters_root(self.config)))


def capacity_snapshot(
    *, checked_unix_ms: int, queued: int, tracked: int, max_tracked: int
) -> OpenEnvTrainingCapacitySnapshot:
    """The run tracker's counts as Kiln's trainer capacity. Runs are this server's training
    jobs: the queue and the tracked set are both bounded by ``max_tracked_runs``."""
    if queued >= max_tracked:
        raise ApiCapacityFull(
            f"{queued} runs already wait for a slot (max_tracked_runs = {max_tracked})"
        )
    return OpenEnvTrainingCapacitySnapshot(
        checked_unix_ms=checked_unix_ms,
        queued_jobs=queued,
        max_queued_jobs=max_tracked,
        tracked_jobs=tracked,
        max_tracked_jobs=max_tracked,
    )


def effective_config(
    config: GrpoConfig,
    raw: Mapping[str, Any] | None,
    *,
    output_adapter: str,
    adapter: str,
    auto_load: bool,
) -> GrpoConfig:
    """Kiln's owned overrides (§5.8): ``output_name`` = the output adapter, ``base_adapter``
    = the behaviour adapter (``null`` for ``base``), ``auto_load`` from the request and
    ``behavior_policy = no_importance_correction``. A request that sets one of them to
    another value is refused, never silently overridden."""
    owned: dict[str, Any] = {
        "behavior_policy": NO_IMPORTANCE_CORRECTION,
        "base_adapter": None if adapter == BASE_ADAPTER else adapter,
        "output_name": output_adapter,
        "auto_load": auto_load,
    }
    for name, value in owned.items():
        if raw is not None and name in raw and getattr(config, name) != value:
            where = "auto_load" if name == "auto_load" else "the request"
            raise ApiTrainingConfigUnsupported(
                f"training_config.{name} is owned by admission (set from {where}); "
                f"it must be omitted or equal {value!r}",
                fields=(f"training_config.{name}",),
            )
    if adapter != BASE_ADAPTER:
        _check_adapter_shape(config, adapter)
    return config.model_copy(update=owned)


def _check_adapter_shape(config: GrpoConfig, adapter: str) -> None:
    """A behaviour adapter is the trainer's starting LoRA, trained in its own shape
    (``train.py`` refuses shape flags next to an input adapter): a LoRA shape other than
    Kiln's default cannot be honoured, so it is refused rather than dropped."""
    default = GrpoConfig()
    for name in ("lora_rank", "lora_alpha"):
        if getattr(config, name) != getattr(default, name):
            raise ApiTrainingConfigUnsupported(
                f"training_config.{name}: the behaviour adapter {snippet(adapter)} is trained "
                "in its own LoRA shape; omit it",
                fields=(f"training_config.{name}",),
            )


def _config(
    raw: Mapping[str, Any] | None, *, output_adapter: str, adapter: str, auto_load: bool
) -> GrpoConfig:
    config = read_training_config(raw)
    check_honoured(config)
    return effective_config(
        config, raw, output_adapter=output_adapter, adapter=adapter, auto_load=auto_load
    )


async def preflight(
    body: Any, source: BehaviourSource, capacity: OpenEnvTrainingCapacitySnapshot
) -> OpenEnvTrainingPreflightReceipt:
    """``POST /v1/openenv/training/preflight``: the receipt, or a typed refusal."""
    request = parse_body(OpenEnvTrainingPreflightRequest, body)
    adapter = rules.behaviour_adapter(request.adapter)
    output = rules.check_adapters(adapter, request.output_adapter)
    rules.check_post_eval(request.post_eval)
    auto_load = True if request.auto_load is None else request.auto_load
    config = _config(
        request.training_config, output_adapter=output, adapter=adapter, auto_load=auto_load
    )
    rules.check_output_free(output, source.installed())
    identity = await source.behaviour(adapter)
    return OpenEnvTrainingPreflightReceipt(
        schema=PREFLIGHT_SCHEMA,
        effective_config=config,
        behavior_policy=identity,
        capacity=capacity,
    )
