"""A train run's ``training`` and ``environment_evaluation`` sections are typed records.

The run is the verify-run fixture's train run (a real oracle collection, the preflight's
sealed contract, library-written evidence and a real paired evaluation; its sections built
from the same records the train kind stores): its ``run.json`` is Kiln's
``kiln.openenv-run.v5`` with both sections (Kiln's published field lists and value lists,
``tests/openenv/records/kiln_published.py``), reads through the store with both sections
typed and is rewritten byte for byte. A status written while the sections were free JSON
(keys sorted) still reads. A malformed section is refused on read, by the store (and so by
restore) and by verify-run, with ``record_invalid`` naming its JSON path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.control.layout import RUN_STATUS_FILE
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control.store import RunStore, status_bytes
from kiln_verify.control.training.evaluation_status import OpenEnvEnvironmentEvalStatus
from kiln_verify.control.training.trainer_status import OpenEnvTrainingStatus
from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.errors import RecordInvalid
from kiln_verify.openenv.runcheck.files import read_status
from kiln_verify.records import Record, sort_keys, validate_record
from oracle.runner import ServerHandle
from tests.openenv.records.kiln_published import KILN, differences
from tests.openenv.runcheck.support import RUN_ID, build_train_run
from tests.openenv.training.conftest import Collected, collected

__all__ = ["collected"]

SECTIONS = {
    "training": "OpenEnvTrainingStatus",
    "environment_evaluation": "OpenEnvEnvironmentEvalStatus",
}
SECTION_RECORDS: dict[str, type[Record]] = {
    "training": OpenEnvTrainingStatus,
    "environment_evaluation": OpenEnvEnvironmentEvalStatus,
}


@pytest.fixture(scope="module")
def run_json(
    collected: Collected, bandit: ServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> bytes:
    """The run's ``run.json`` as the store writes it (the fixture sends Kiln's input alias
    ``environment_urls``; the store writes ``environments``)."""
    run = build_train_run(collected, tmp_path_factory.mktemp("train-run"), bandit.base_url)
    written = json.loads((run.directory / RUN_STATUS_FILE).read_bytes())
    return status_bytes(validate_record(OpenEnvRunStatus, written))


def _store(root: Path, data: bytes) -> RunStore:
    store = RunStore(root)
    store.run_dir(RUN_ID).mkdir()
    (store.run_dir(RUN_ID) / RUN_STATUS_FILE).write_bytes(data)
    return store


def test_a_train_run_status_is_kiln_s_record_and_reads_back_typed(
    run_json: bytes, tmp_path: Path
) -> None:
    value = json.loads(run_json)
    assert differences("OpenEnvRunStatus", value) == []  # both sections, their children too
    assert set(value["environment_evaluation"]) == KILN["OpenEnvEnvironmentEvalStatus"].allowed
    assert set(value["training"]["training_data"]) == {
        "source",
        "admitted_corpus_sha256",
        "rows",
        "openenv",
    }

    status = _store(tmp_path, run_json).load(RUN_ID)
    assert isinstance(status.training, OpenEnvTrainingStatus)
    assert isinstance(status.environment_evaluation, OpenEnvEnvironmentEvalStatus)
    assert status.training.state == status.environment_evaluation.state == "completed"
    assert status.environment_evaluation.evidence is not None
    assert status.environment_evaluation.outcome == "promoted"
    assert status_bytes(status) == run_json  # on disk: the same bytes, Kiln's order
    # each section in Kiln's struct order (the record's field order), not sorted
    for name, record in SECTION_RECORDS.items():
        keys = list(value[name])
        assert keys == [key for key in record.model_fields if key in keys]
        assert keys != sorted(keys)


def test_a_status_written_while_the_sections_were_free_json_still_reads(
    run_json: bytes, tmp_path: Path
) -> None:
    value = json.loads(run_json)
    for name in SECTIONS:
        value[name] = sort_keys(value[name])  # how the free-JSON field wrote them
    old = dumps_pretty(value)
    assert old != run_json
    status = _store(tmp_path, old).load(RUN_ID)
    assert status == validate_record(OpenEnvRunStatus, json.loads(run_json))
    assert status_bytes(status) == run_json  # the next save writes Kiln's order


def _set(value: dict[str, Any], path: str, item: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        value = value[part]
    if item is _DROP:
        del value[last]
    else:
        value[last] = item


_DROP = object()

MALFORMED = [
    # a state outside Kiln's lists
    ("environment_evaluation.state", "running", "environment_evaluation.state"),
    ("environment_evaluation.progress.state", "done", "environment_evaluation.progress.state"),
    ("training.state", "cancelled", "training.state"),  # Kiln's TrainingState has none
    ("training.gate_outcome", "rejected", "training.gate_outcome"),  # Kiln says regression
    ("environment_evaluation.outcome", "demoted", "environment_evaluation.outcome"),
    # a field Kiln's closed records do not have
    ("training.queue_position", 1, "training.queue_position"),
    ("environment_evaluation.receipt_sha256", "x", "environment_evaluation.receipt_sha256"),
    ("training.training_data.openenv.corpus", 1, "training.training_data.openenv.corpus"),
    # a required field missing, or null where Kiln omits
    ("training.job_id", _DROP, "training.job_id"),
    ("environment_evaluation.baseline", _DROP, "environment_evaluation.baseline"),
    ("training.training_data.rows", _DROP, "training.training_data.rows"),
    ("environment_evaluation.verdict", None, "environment_evaluation"),
    # a wrong type
    ("training.progress", "1.0", "training.progress"),
    ("environment_evaluation.groups", 0, "environment_evaluation.groups"),
]


@pytest.mark.parametrize(("path", "item", "where"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_section_is_refused_on_read(
    run_json: bytes, tmp_path: Path, path: str, item: Any, where: str
) -> None:
    value = json.loads(run_json)
    _set(value, path, item)
    store = _store(tmp_path / "runs", dumps_pretty(value))
    with pytest.raises(RecordInvalid) as caught:
        store.load(RUN_ID)
    assert caught.value.code == "record_invalid"
    assert f"OpenEnvRunStatus at $.{where}" in caught.value.rule
    restored = store.restore()  # a restarted server lists it, never serves it
    assert restored.statuses == []
    assert restored.skipped[0].startswith(f"{RUN_ID}: record_invalid: ")
    with pytest.raises(RecordInvalid, match=rf"at \$\.{where}"):
        read_status(str(store.run_dir(RUN_ID)))  # verify-run's reader


@settings(max_examples=30)
@given(
    section=st.sampled_from(sorted(SECTIONS)),
    key=st.text(st.characters(codec="utf-8"), min_size=1, max_size=12),
)
def test_no_key_outside_kiln_s_record_is_read(run_json: bytes, section: str, key: str) -> None:
    value = json.loads(run_json)
    if key in KILN[SECTIONS[section]].allowed:
        return
    value[section][key] = 0
    with pytest.raises(RecordInvalid):
        validate_record(OpenEnvRunStatus, value)
