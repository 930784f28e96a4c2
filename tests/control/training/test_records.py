"""Training admission's records: Kiln's published field lists, the v5 contract rule, sealing,
the effective-configuration table against ``train.py``'s parser and against the docs."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.status import RUN_SCHEMA, OpenEnvRunStatus, RunAdmission, RunProgress
from kiln_verify.control.store import STATUS_FILE, RunStore
from kiln_verify.control.training.effective import FIELDS, runner_options
from kiln_verify.control.training.grpo_config import GrpoConfig
from kiln_verify.control.training.preflight import capacity_snapshot, preflight
from kiln_verify.control.training.records import (
    OpenEnvTrainingContract,
    OpenEnvTrainingPreflightReceipt,
    OpenEnvTrainingPreflightRequest,
)
from kiln_verify.control.training.seal import seal_training_contract, sealed_contract
from kiln_verify.errors import ApiTrainingRequestInvalid, RecordInvalid
from kiln_verify.hf.runner.train import build_parser
from kiln_verify.records import Record
from tests.control.training.support import FixedSource
from tests.openenv.records.kiln_published import KILN, differences

DOCS = Path(__file__).resolve().parents[3] / "docs" / "training-admission.md"
RUN_ID = "0b7e4f0a-5f69-4a58-9f1e-2b2f1d7c9a11"


def _receipt(config: dict[str, Any] | None = None) -> OpenEnvTrainingPreflightReceipt:
    body: dict[str, Any] = {"adapter": "base", "output_adapter": "agent-2"}
    if config is not None:
        body["training_config"] = config
    capacity = capacity_snapshot(checked_unix_ms=5, queued=0, tracked=1, max_tracked=128)
    return asyncio.run(preflight(body, FixedSource(), capacity))


def _names(model: type[Record]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (GrpoConfig, "GrpoConfig"),
        (OpenEnvTrainingPreflightRequest, "OpenEnvTrainingPreflightRequest"),
        (OpenEnvTrainingPreflightReceipt, "OpenEnvTrainingPreflightReceipt"),
        (OpenEnvTrainingContract, "OpenEnvTrainingContract"),
    ],
)
def test_every_field_is_kiln_s_and_kiln_s_required_ones_exist(
    model: type[Record], name: str
) -> None:
    kiln = KILN[name]
    writable = _names(model)
    assert writable <= kiln.allowed
    assert kiln.required <= writable
    if name == "GrpoConfig":  # every field but the input alias, in Kiln's order
        assert writable == kiln.allowed - {"reference_policy"}


def test_a_receipt_and_its_contract_are_kiln_s_records() -> None:
    receipt = _receipt({"lora_rank": 8, "seed": 3, "reference_policy": {"kind": "base_per_step"}})
    written = receipt.to_json()
    assert differences("OpenEnvTrainingPreflightReceipt", written) == []
    assert written["capacity_reserved"] is False
    config = written["effective_config"]
    assert (config["lora_rank"], config["seed"], config["output_name"]) == (8, 3, "agent-2")
    assert (config["base_adapter"], config["auto_load"], config["learning_rate"]) == (
        None,
        True,
        None,
    )
    assert "resume_checkpoint" not in config
    contract = receipt.training_contract().to_json()
    assert differences("OpenEnvTrainingContract", contract) == []
    assert contract["effective_config"] == config
    assert OpenEnvTrainingContract.from_json(contract).to_json() == contract


def test_grpo_config_reads_kiln_s_documents_as_kiln_does() -> None:
    """Open like Kiln's (a newer key is ignored when reading a status), the alias resolved."""
    read = GrpoConfig.from_json({"reference_policy": {"kind": "ema"}, "newer_kiln_key": 1})
    assert read.kl_reference_policy.to_json() == {"kind": "ema", "decay": 0.0, "refresh_every": 32}
    assert "newer_kiln_key" not in read.to_json()
    with pytest.raises(RecordInvalid):
        GrpoConfig.from_json({"reference_policy": {}, "kl_reference_policy": {}})
    with pytest.raises(RecordInvalid, match="takes no momentum"):
        GrpoConfig.from_json({"optimizer": {"kind": "adam_w", "momentum": 0.9}})


def _status(kind: str, schema: str = RUN_SCHEMA, **extra: Any) -> dict[str, Any]:
    request: dict[str, Any] = {"kind": kind, "environment_urls": ["http://127.0.0.1:9"]}
    if kind == "train":
        request["output_adapter"] = "agent-2"
    return {
        "schema": schema,
        "run_id": RUN_ID,
        "kind": kind,
        "state": "queued",
        "request": OpenEnvRunRequest.from_json(request).to_json(),
        "submitted_unix_ms": 1,
        "admission": {"max_active_runs": 4, "sequence": 1, "queue_position": 1},
        "progress": {
            "groups_completed": 0,
            "groups_total": 8,
            "rollouts_completed": 0,
            "rollouts_total": 32,
        },
        **extra,
    }


def test_v5_train_status_carries_the_contract_and_no_other_status_does() -> None:
    contract = _receipt().training_contract().to_json()
    train = OpenEnvRunStatus.from_json(_status("train", training_contract=contract))
    assert differences("OpenEnvRunStatus", train.to_json()) == []
    for bad in (
        _status("train"),
        _status("rollout", training_contract=contract),
        _status("train", "kiln.openenv-run.v4", training_contract=contract),
    ):
        with pytest.raises(RecordInvalid, match="training_contract"):
            OpenEnvRunStatus.from_json(bad)


def test_sealing_writes_the_contract_into_the_first_and_only_file(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    contract = _receipt({"lora_rank": 4}).training_contract()
    request = OpenEnvRunRequest.from_json(
        {"kind": "train", "environment_urls": ["http://127.0.0.1:9"], "output_adapter": "a2"}
    )
    unsealed = OpenEnvRunStatus.model_construct(
        schema_=RUN_SCHEMA,
        run_id=RUN_ID,
        kind="train",
        state="queued",
        request=request,
        submitted_unix_ms=1,
        progress=RunProgress(
            groups_completed=0, groups_total=8, rollouts_completed=0, rollouts_total=32
        ),
        training_contract=None,
        admission=RunAdmission(max_active_runs=4, sequence=1, queue_position=1),
    )
    sealed = seal_training_contract(store, unsealed, contract)
    assert [p.name for p in store.run_dir(RUN_ID).iterdir()] == [STATUS_FILE]
    loaded = store.load(RUN_ID)
    assert loaded == sealed
    assert sealed_contract(loaded) == contract
    assert sealed_contract(loaded).effective_config.lora_rank == 4
    with pytest.raises(ApiTrainingRequestInvalid, match="already sealed"):
        seal_training_contract(store, sealed, _receipt().training_contract())


_HONOURED = st.fixed_dictionaries(
    {},
    optional={
        "learning_rate": st.floats(1e-7, 1.0),
        "kl_coeff": st.floats(0.0, 10.0),
        "clip_epsilon": st.floats(0.0, 0.99),
        "clip_eps_high": st.floats(0.0, 5.0),
        "advantage_mode": st.sampled_from(["vanilla", "dr_grpo"]),
        "loss_aggregation": st.sampled_from(["per_sample", "token_level"]),
        "kl_estimator": st.sampled_from(["k1", "k3", "none"]),
        "is_level": st.sampled_from(["token", "sequence"]),
        "lora_rank": st.integers(1, 1024),
        "lora_alpha": st.integers(1, 4096),
        "seed": st.integers(0, 2**32 - 1),
        "optimizer": st.builds(
            lambda wd: {"kind": "adam_w", "weight_decay": wd}, st.floats(0.0, 1.0)
        ),
    },
)


@given(_HONOURED)
def test_every_honoured_configuration_is_one_train_py_accepts(raw: dict[str, Any]) -> None:
    config = GrpoConfig.from_json(raw)
    args = build_parser().parse_args(["bundle", "--base-model", "m", *runner_options(config)])
    beta = 0.0 if config.kl_estimator == "none" else config.kl_coeff
    assert (float(args.beta), float(args.epsilon)) == (beta, config.clip_epsilon)
    assert (args.lora_rank, args.lora_alpha) == (config.lora_rank, int(config.lora_alpha))
    assert args.seed == (42 if config.seed is None else config.seed)
    assert args.importance_sampling_level == config.is_level
    assert args.loss_type == {"token_level": "dapo", "per_sample": "grpo"}[config.loss_aggregation]
    assert args.scale_rewards == {"dr_grpo": "none", "vanilla": "group"}[config.advantage_mode]
    if config.learning_rate is not None:
        assert float(args.learning_rate) == config.learning_rate


def test_the_docs_table_is_the_code_s_table() -> None:
    rows = re.findall(
        r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$",
        DOCS.read_text(encoding="utf-8"),
        re.MULTILINE,
    )
    documented = [tuple(cell.strip() for cell in row) for row in rows]
    assert documented == [(f.name, f.trl, f.option, f.rule) for f in FIELDS]
