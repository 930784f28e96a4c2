"""Training admission of a ``kind=train`` run, and its re-admission after a restart.

:func:`admit_train` runs once, when the run is created: the request rules of training
admission (:func:`~kiln_verify.control.training.rules.check_train_request`), the GRPO
configuration read, checked against the trainer and given Kiln's owned overrides (the
same functions the preflight uses, so a run seals exactly what a preflight of the same
request answers), the environment-origin rule and credential handles, the collector's
controls with GRPO recording on, and the behaviour policy's identity (the resident model
playing ``base`` or an installed adapter; loaded on first use, in the request). Its
:class:`TrainControls` carry the ``kiln.openenv-training-contract.v1`` the registry seals
into the run's first ``run.json`` (:attr:`~kiln_verify.control.kind.RunKind.contract`).

Every later stage reads the contract back from the run's status
(:func:`~kiln_verify.control.training.seal.sealed_contract`), never from the controls or
the server's current defaults; a run restored from disk is re-admitted by :func:`readmit`
from its request and its sealed contract only.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from kiln_verify.control.admission import check_environments, collection_controls
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.request import BASE_ADAPTER, OpenEnvRunRequest
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control.training import rules
from kiln_verify.control.training.effective import check_honoured, read_training_config
from kiln_verify.control.training.preflight import effective_config
from kiln_verify.control.training.records import (
    TRAINING_CONTRACT_SCHEMA,
    OpenEnvTrainingContract,
)
from kiln_verify.control.training.seal import sealed_contract
from kiln_verify.errors import (
    ApiAdapterUnknown,
    ApiCredentialInvalid,
    ApiEnvironmentEvalInvalid,
    ApiRequestInvalid,
    ControlApiError,
    KilnError,
    snippet,
)
from kiln_verify.openenv.collect import CollectionControls
from kiln_verify.records import validate_record
from kiln_verify.records.policy import BehaviorPolicyIdentity

__all__ = ["TRAIN_CORPUS", "TrainControls", "admit_train", "readmit"]

TRAIN_CORPUS: Final = "trainer/train.grpo.jsonl"
"""The selected recorded-GRPO corpus, relative to the run directory (the export's input)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TrainControls:
    """What admission computed: the collector's controls and the contract to seal."""

    collection: CollectionControls
    contract: OpenEnvTrainingContract


def _collection(request: OpenEnvRunRequest, config: ServerConfig) -> CollectionControls:
    """The collector's controls with exact token provenance retained (GRPO recording)."""
    check_environments(request.environment_urls, request.credential_ids, config)
    try:
        return dataclasses.replace(collection_controls(request, config), grpo_output=TRAIN_CORPUS)
    except ApiCredentialInvalid:
        raise
    except KilnError as exc:
        raise ApiRequestInvalid(exc.rule, hint=exc.hint) from None


def _behaviour(config: ServerConfig, adapter: str) -> BehaviorPolicyIdentity:
    """The resident model's identity playing ``adapter`` (blocking: loads it on first use)."""
    from kiln_verify.control.resident.serving import resident_for, serves

    if not serves(config, adapter):
        raise ApiAdapterUnknown(
            f"adapter {snippet(adapter)} is neither base nor installed on the resident model"
        )
    policy = resident_for(config).policy(adapter, base_name=BASE_ADAPTER)
    return validate_record(BehaviorPolicyIdentity, policy.identity().rollout_identity())


def _installed(config: ServerConfig) -> frozenset[str]:
    from kiln_verify.control.resident.store import adapters_root, listed_names

    return frozenset(listed_names(adapters_root(config)))


def admit_train(
    request: OpenEnvRunRequest, config: ServerConfig, *, evaluates: bool = False
) -> TrainControls:
    """Training admission of a normalized ``kind=train`` request (see the module doc);
    ``evaluates``: whether this server runs the paired evaluation (``environment_eval``)."""
    require_resident_model(config, "kind=train")
    output = rules.check_train_request(request)
    if request.environment_eval is not None and not evaluates:
        raise ApiEnvironmentEvalInvalid(
            "environment_eval (the paired held-out evaluation) is not available on this "
            "server yet; submit the run without it",
            fields=("environment_eval",),
        )
    adapter = rules.behaviour_adapter(request.adapter)
    grpo = read_training_config(request.training_config)
    check_honoured(grpo)
    grpo = effective_config(
        grpo,
        request.training_config,
        output_adapter=output,
        adapter=adapter,
        auto_load=request.auto_load,
    )
    rules.check_output_free(output, _installed(config))
    collection = _collection(request, config)
    contract = OpenEnvTrainingContract(
        schema=TRAINING_CONTRACT_SCHEMA,
        effective_config=grpo,
        behavior_policy=_behaviour(config, adapter),
    )
    return TrainControls(collection, contract)


def readmit(status: OpenEnvRunStatus, config: ServerConfig) -> TrainControls:
    """The controls of a run restored from disk: its request and its sealed contract (a
    refusal is ``persisted_contract_invalid``: the run cannot execute as it was admitted)."""
    contract = sealed_contract(status)
    try:
        require_resident_model(config, "kind=train")
        collection = _collection(status.request, config)
    except ControlApiError as exc:
        raise ApiRequestInvalid(f"the sealed run cannot execute: {exc.rule}") from None
    return TrainControls(collection, contract)
