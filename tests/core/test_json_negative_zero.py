"""``-0`` reads as the float ``-0.0``, as serde_json reads it (issue 14.7).

serde_json turns an integer token that negates to zero into ``F64(-0.0)``, so Kiln refuses
``-0`` in every integer field. Our parser now reads it the same way in every tier (orjson,
the C scanner, the strict path, the streaming reader), so the records' strict integer
fields refuse it (``record_invalid``) and a free-form value keeps the sign and the float
type. ``-0.0`` and ``-0e0`` were floats already (docs/byte-rules.md).
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from kiln_verify.core.jsonfast import numbers_suspicious
from kiln_verify.core.jsonio import dumps_canonical, loads, loads_strict
from kiln_verify.core.jsonstream import iter_members
from kiln_verify.errors import KilnError
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.summary import RolloutRecord
from tests.core.test_json_properties import typed

CAP = 1 << 20


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b"-0", -0.0),
        (b"[-0]", [-0.0]),
        (b"[-0,0,-0.0,-0e0,-0.5,-10]", [-0.0, 0, -0.0, -0.0, -0.5, -10]),
        (b'{"a":-0}', {"a": -0.0}),
        (b'{"a" : -0 , "b":[ -0 ]}', {"a": -0.0, "b": [-0.0]}),
        (b'{\n  "a": -0\n}\n', {"a": -0.0}),  # our pretty spelling otherwise
        (b'{"-0":"-0","a":1e-0}', {"-0": "-0", "a": 1.0}),  # in strings, in an exponent
    ],
)
def test_every_tier_reads_minus_zero_as_a_float(data: bytes, value: Any) -> None:
    assert typed(loads(data, max_bytes=CAP)) == typed(value)
    assert typed(loads(data.decode(), max_bytes=CAP)) == typed(value)
    assert typed(loads_strict(data, max_bytes=CAP)) == typed(value)


def test_the_fast_path_hands_minus_zero_to_the_strict_path() -> None:
    assert numbers_suspicious(b"[-0]")
    assert numbers_suspicious(b'{"a": -0}')
    for clean in (b"[-0.0]", b"[-0e5]", b"[-05]", b'["-0"]', b"[1e-0]", b'{"x-0":1}'):
        assert not numbers_suspicious(clean), clean


def test_the_streaming_reader_agrees() -> None:
    data = b'{"head":-0,"items":[{"a":-0},{"a":0},[-0]],"tail":-0}'
    members = list(iter_members(io.BytesIO(data).read, "items", max_bytes=CAP))
    values = [(m.key, typed(m.value)) for m in members]
    assert values == [
        ("head", typed(-0.0)),
        ("items", typed({"a": -0.0})),
        ("items", typed({"a": 0})),
        ("items", typed([-0.0])),
        ("tail", typed(-0.0)),
    ]


def _record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "group_index": 0,
        "candidate_index": 0,
        "environment_name": "e",
        "environment_url": "http://127.0.0.1:1",
        "seed": 0,
        "steps": 0,
        "episode_return": 0.0,
        "terminal_done": False,
        "termination": "max_steps",
        "recoverable_protocol_errors": 0,
        "capacity_retries": 0,
        "model_tokens": 0,
        "model_latency_ms": 0.0,
    }
    record.update(changes)
    return record


@pytest.mark.parametrize("field", ["group_index", "seed", "steps", "model_tokens"])
def test_integer_fields_refuse_minus_zero(field: str) -> None:
    good = dumps_canonical(_record())
    RolloutRecord.from_json(loads(good, max_bytes=CAP))
    bad = good.replace(f'"{field}":0'.encode(), f'"{field}":-0'.encode())
    assert bad != good
    with pytest.raises(KilnError) as caught:
        RolloutRecord.from_json(loads(bad, max_bytes=CAP))
    assert caught.value.code == "record_invalid"


def test_free_form_values_keep_the_float() -> None:
    observation = ObservationRecord.from_json(
        loads(b'{"observation":{"x":-0},"reward":-0,"done":false}', max_bytes=CAP)
    )
    assert typed(observation.observation) == typed({"x": -0.0})
    assert observation.reward.to_json() == -0.0
    assert type(observation.reward.to_json()) is float  # a float reward, as in Kiln
    assert dumps_canonical(observation.observation) == b'{"x":-0.0}'
