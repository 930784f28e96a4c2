"""The request rules of training admission (kiln-openenv-contract §5.8, §9, §12).

What a ``kind=train`` request (and a preflight) must satisfy before anything runs, checked
in this order, each with its own code:

1. ``output_adapter`` is present (``openenv_training_request_invalid``);
2. the behaviour adapter is ``base`` or an adapter name, the output adapter an adapter name
   (the resident-model store's rule, :func:`kiln_verify.control.resident.names.
   check_adapter_name`: ``adapter_name_invalid``);
3. the two differ (``openenv_training_request_invalid``): an adapter never trains itself;
4. ``post_eval`` (Kiln's static suites) is refused: this server has none
   (``openenv_post_eval_unsupported``, 501);
5. ``environment_eval``: its seeds ``[seed_start, seed_start+groups)`` do not overlap the
   training seeds, and a gate has at least ``MINIMUM_PAIRED_GROUPS`` (20) groups
   (``openenv_environment_eval_invalid``);
6. the output adapter is not installed yet (:func:`check_output_free`, ``adapter_exists``):
   the installed set comes from whoever holds the adapters (checked after the GRPO
   configuration, :mod:`~kiln_verify.control.training.effective`).

None of these reads a file, opens a socket or writes anything.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kiln_verify.control.request import BASE_ADAPTER, OpenEnvRunRequest
from kiln_verify.control.resident.names import check_adapter_name
from kiln_verify.control.training.records import OpenEnvEnvironmentEvalConfig
from kiln_verify.errors import (
    ApiAdapterExists,
    ApiEnvironmentEvalInvalid,
    ApiPostEvalUnsupported,
    ApiRequestInvalid,
    ApiTrainingRequestInvalid,
    RecordInvalid,
    snippet,
)
from kiln_verify.records import validate_record

__all__ = [
    "DEFAULT_EVAL_GROUPS",
    "DEFAULT_EVAL_GROUP_SIZE",
    "behaviour_adapter",
    "check_adapters",
    "check_environment_eval",
    "check_output_free",
    "check_post_eval",
    "check_train_request",
]

DEFAULT_EVAL_GROUPS = 20
"""``environment_eval.groups`` when omitted (Kiln's Rust default; §9)."""
DEFAULT_EVAL_GROUP_SIZE = 1
"""``environment_eval.group_size`` when omitted (Kiln's Rust default; §9)."""


def behaviour_adapter(value: str | None) -> str:
    """The behaviour adapter as a request names it: ``base`` for none/null/base (any case,
    surrounding spaces dropped, as Kiln trims it), else the name itself."""
    text = (value if value is not None else BASE_ADAPTER).strip()
    return BASE_ADAPTER if text.lower() in ("base", "none", "null") else text


def check_adapters(adapter: str, output_adapter: str | None) -> str:
    """Rules 1-3: the output adapter's name, checked against the behaviour adapter."""
    if output_adapter is None:
        raise ApiTrainingRequestInvalid(
            "kind=train requires output_adapter (the name of the adapter it trains)",
            fields=("output_adapter",),
        )
    if adapter != BASE_ADAPTER:
        check_adapter_name(adapter)
    check_adapter_name(output_adapter)
    if output_adapter == adapter:
        raise ApiTrainingRequestInvalid(
            f"output_adapter {snippet(output_adapter)} equals the behaviour adapter; an "
            "adapter never trains over itself",
            fields=("adapter", "output_adapter"),
        )
    return output_adapter


def check_post_eval(post_eval: Mapping[str, Any] | None) -> None:
    """Rule 4: Kiln's static post-training suites do not exist on this server."""
    if post_eval is not None:
        raise ApiPostEvalUnsupported(
            "post_eval (Kiln's static evaluation suites) is not supported by this server",
            fields=("post_eval",),
        )


def check_environment_eval(
    raw: Mapping[str, Any] | None, *, seed_start: int, groups: int
) -> OpenEnvEnvironmentEvalConfig | None:
    """Rule 5 for a request training on seeds ``[seed_start, seed_start+groups)``."""
    if raw is None:
        return None
    try:
        config = validate_record(OpenEnvEnvironmentEvalConfig, dict(raw))
    except RecordInvalid as exc:
        raise ApiRequestInvalid(f"environment_eval: {exc.rule}") from None
    eval_groups = DEFAULT_EVAL_GROUPS if config.groups is None else config.groups
    eval_start = seed_start + groups if config.seed_start is None else config.seed_start
    if eval_start < seed_start + groups and seed_start < eval_start + eval_groups:
        raise ApiEnvironmentEvalInvalid(
            f"evaluation seeds [{eval_start}, {eval_start + eval_groups}) overlap the training "
            f"seeds [{seed_start}, {seed_start + groups})",
            fields=("environment_eval.seed_start",),
        )
    # the evaluation engine's own constant, imported here: the package is not otherwise
    # loaded by a server that only admits
    from kiln_verify.openenv.evaluate.evidence import MINIMUM_PAIRED_GROUPS

    if config.gate is not None and eval_groups < MINIMUM_PAIRED_GROUPS:
        raise ApiEnvironmentEvalInvalid(
            f"a gate needs at least {MINIMUM_PAIRED_GROUPS} evaluation groups (got {eval_groups})",
            fields=("environment_eval.groups",),
        )
    return config


def check_output_free(output_adapter: str, installed: Collection[str]) -> None:
    """Rule 6: an installed adapter is never trained over (nor replaced)."""
    if output_adapter in installed:
        raise ApiAdapterExists(
            f"output_adapter {snippet(output_adapter)} is already installed on this server",
            fields=("output_adapter",),
        )


def check_train_request(request: OpenEnvRunRequest) -> str:
    """Rules 1-5 for a normalized ``kind=train`` run request; its output adapter. The GRPO
    configuration and rule 6 follow in the run kind's admission
    (:func:`~kiln_verify.control.kinds.train_admission.admit_train`), in the preflight's
    order."""
    output = check_adapters(behaviour_adapter(request.adapter), request.output_adapter)
    check_post_eval(request.post_eval)
    check_environment_eval(
        request.environment_eval, seed_start=request.seed_start, groups=request.groups
    )
    return output
