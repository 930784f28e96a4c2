"""The control-plane records: normalization, key alphabet, bounds, closed status, contract."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kiln_verify.control.admission import parse_run_request
from kiln_verify.control.failures import bounded_message, explicit
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.schema_export import SCHEMA_PATH, build_schema, main, schema_bytes
from kiln_verify.control.status import RUN_SCHEMA, OpenEnvRunStatus, RunAdmission, RunProgress
from kiln_verify.errors import ApiIdempotencyKeyInvalid, ApiRequestInvalid, ApiUrlInvalid
from kiln_verify.limits import MAX_FAILURE_MESSAGE_BYTES, MAX_IDEMPOTENCY_KEY_BYTES
from kiln_verify.records import validate_record

URL = "http://127.0.0.1:9000"
KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"


def _request(**fields: Any) -> OpenEnvRunRequest:
    return parse_run_request({"environment_urls": [URL], **fields})


def test_defaults_fill_and_empty_optionals_vanish() -> None:
    assert _request().to_json() == {
        "kind": "rollout",
        "environment_urls": [URL],
        "adapter": "base",
        "groups": 8,
        "group_size": 4,
        "seed_start": 0,
        "reset_options": {},
        "max_steps": 8,
        "concurrency": 4,
        "max_action_tokens": 256,
        "temperature": 1.0,
        "thinking": True,
        "protocol_error_reward": -1.0,
        "max_recoverable_errors": 3,
        "capacity_wait_seconds": 300,
        "auto_load": True,
    }


@pytest.mark.parametrize(
    "spelling",
    [
        {"environments": [URL]},
        {"environment_urls": [URL + "/"]},
        {"environment_urls": ["127.0.0.1:9000"]},
        {"environment_urls": [URL], "temperature": 1, "protocol_error_reward": -1},
        {"environment_urls": [URL], "adapter": "Null"},
        {"environment_urls": [URL], "credential_ids": [], "environment_reset_options": []},
        {"environment_urls": [URL], "reset_options": {}, "kind": "rollout", "auto_load": True},
    ],
)
def test_spellings_of_one_meaning_normalize_to_one_request(spelling: dict[str, Any]) -> None:
    assert parse_run_request(spelling).to_json() == _request().to_json()


def test_free_objects_compare_by_value_not_key_order() -> None:
    first = _request(reset_options={"a": 1, "b": {"y": 2, "x": 1}})
    second = _request(reset_options={"b": {"x": 1, "y": 2}, "a": 1})
    assert first.to_json() == second.to_json()
    assert (
        _request(reset_options={"a": 1}).to_json() != _request(reset_options={"a": 1.5}).to_json()
    )


@given(st.text(KEY_ALPHABET, min_size=1, max_size=MAX_IDEMPOTENCY_KEY_BYTES))
def test_every_key_of_the_alphabet_is_accepted(key: str) -> None:
    assert _request(idempotency_key=key).idempotency_key == key


@given(st.text(min_size=1, max_size=8).filter(lambda t: any(c not in KEY_ALPHABET for c in t)))
def test_keys_outside_the_alphabet_are_refused(key: str) -> None:
    with pytest.raises(ApiIdempotencyKeyInvalid):
        _request(idempotency_key=key)


def test_key_length_boundary() -> None:
    assert _request(idempotency_key="k" * MAX_IDEMPOTENCY_KEY_BYTES).idempotency_key
    for bad in ("", "k" * (MAX_IDEMPOTENCY_KEY_BYTES + 1), 7, None):
        with pytest.raises(ApiIdempotencyKeyInvalid):
            _request(idempotency_key=bad)


@pytest.mark.parametrize(
    "fields",
    [
        {"environments": [URL], "environment_urls": [URL]},
        {"groups": True},
        {"groups": 1.0},
        {"temperature": "1"},
        {"credential_ids": ["-"]},
        {"credential_ids": ["x" * 65]},
        {"credential_ids": ["a", None]},
        {"reset_options": [1]},
        {"reset_options": {"a": 1}, "environment_reset_options": [{"b": 2}]},
        {"adapter": ".hidden"},
        {"adapter": "a/b"},
        {"output_adapter": None},
        {"environment_urls": []},
    ],
)
def test_malformed_requests_are_invalid(fields: dict[str, Any]) -> None:
    body = {"environment_urls": [URL], **fields}
    with pytest.raises(ApiRequestInvalid):
        parse_run_request(body)


def test_bad_urls_have_their_own_code() -> None:
    for url in ("ftp://h", "http://h/?q=1", "http://h/#f", "http://u@h"):
        with pytest.raises(ApiUrlInvalid):
            parse_run_request({"environment_urls": [url]})


def test_train_requests_parse_with_their_training_fields() -> None:
    train = _request(
        kind="train",
        output_adapter="agent",
        training_config={"lora_rank": 8},
        post_eval={"suite": "gsm8k"},
        environment_eval={"groups": 20},
    )
    assert train.train_only_fields() == [
        "output_adapter",
        "training_config",
        "post_eval",
        "environment_eval",
    ]
    assert train.to_json()["training_config"] == {"lora_rank": 8}


def test_failure_message_boundary() -> None:
    exact = "é" * (MAX_FAILURE_MESSAGE_BYTES // 2)
    assert bounded_message(exact) == exact
    longer = exact + "x"
    cut = bounded_message(longer)
    assert cut.endswith("...")
    assert len(cut.encode()) <= MAX_FAILURE_MESSAGE_BYTES
    assert cut == "é" * (MAX_FAILURE_MESSAGE_BYTES // 2 - 2) + "..."
    record = explicit("internal_error", "orchestration", False, longer, "h", 1)
    assert len(record.message.encode()) <= MAX_FAILURE_MESSAGE_BYTES
    with pytest.raises(ValueError, match="4096"):
        record.model_validate({**record.to_json(), "message": longer})


def _status(**fields: Any) -> dict[str, Any]:
    status = OpenEnvRunStatus(
        schema=RUN_SCHEMA,
        run_id="0d0f3650-9614-4ccc-b507-a98394e2a3c4",
        kind="rollout",
        state="queued",
        request=_request(),
        submitted_unix_ms=1,
        admission=RunAdmission(max_active_runs=1, sequence=1, queue_position=1),
        progress=RunProgress(
            groups_completed=0, groups_total=8, rollouts_completed=0, rollouts_total=32
        ),
    ).to_json()
    status.update(fields)
    return status


def test_status_round_trips_and_refuses_what_v5_forbids() -> None:
    document = _status()
    assert validate_record(OpenEnvRunStatus, document).to_json() == document
    no_admission = {k: v for k, v in document.items() if k != "admission"}
    without_position = _status(admission={"max_active_runs": 1, "sequence": 1})
    for bad in (
        no_admission,
        without_position,
        _status(kind="train"),
        _status(extra=1),
        _status(error=None),
        _status(state="running"),
    ):
        with pytest.raises(Exception, match="record_invalid"):
            validate_record(OpenEnvRunStatus, bad)


def test_checked_in_contract_matches_the_records() -> None:
    assert SCHEMA_PATH.read_bytes() == schema_bytes(), (
        "contracts/kiln-control-plane-v1.schema.json drifted; run "
        "python -m kiln_verify.control.schema_export"
    )
    assert main(["--check"]) == 0


def test_contract_validates_our_documents_and_rejects_nulls() -> None:
    schema = dict(build_schema())
    del schema["oneOf"]
    schema["$ref"] = "#/$defs/OpenEnvRunStatus"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    document = _status()
    assert list(validator.iter_errors(document)) == []
    with_null = copy.deepcopy(document)
    with_null["failure"] = None
    assert not validator.is_valid(with_null)
    assert build_schema()["$defs"]["OpenEnvRunRequest"]["x-kiln-input-aliases"] == {
        "environments": "environment_urls"
    }
