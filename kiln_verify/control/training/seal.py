"""Sealing: a train run's ``run.json`` holds its training contract before anything else.

A ``kind=train`` run is created by :func:`seal_training_contract`: its directory appears
(atomically, through :meth:`~kiln_verify.control.store.RunStore.create`) with one file,
``run.json``, whose v5 status already carries the admitted
``kiln.openenv-training-contract.v1``. Collection, the trainer, the evaluation and a restart
read the contract back with :func:`sealed_contract`, never the server's current defaults:
the status record itself refuses a v5 train status without one, and the store never
rewrites a run's request or contract (later saves copy the status they loaded).
"""

from __future__ import annotations

from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control.store import RunStore
from kiln_verify.control.training.records import OpenEnvTrainingContract
from kiln_verify.errors import ApiTrainingRequestInvalid, RecordInvalid

__all__ = ["seal_training_contract", "sealed_contract"]


def seal_training_contract(
    store: RunStore, status: OpenEnvRunStatus, contract: OpenEnvTrainingContract
) -> OpenEnvRunStatus:
    """Create the train run's directory with ``run.json`` carrying ``contract``; its first
    and, at that moment, only file. Returns the sealed status."""
    if status.kind != "train":
        raise ApiTrainingRequestInvalid(f"run {status.run_id} is not a kind=train run")
    if status.training_contract is not None and status.training_contract != contract:
        raise ApiTrainingRequestInvalid(f"run {status.run_id} is already sealed")
    sealed = status.model_copy(update={"training_contract": contract})
    store.create(sealed)
    return sealed


def sealed_contract(status: OpenEnvRunStatus) -> OpenEnvTrainingContract:
    """The contract every later stage of a train run executes (refused when missing)."""
    if status.training_contract is None:
        raise RecordInvalid(f"run {status.run_id} has no sealed training_contract")
    return status.training_contract
