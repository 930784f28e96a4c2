"""f64 values survive write → read bit-exactly (the verifier compares bits)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.openenv.records import serialize
from kiln_verify.openenv.records.summary import RolloutSummary, read_summary
from kiln_verify.records import bits_equal
from tests.openenv.records import fixtures

_BASE = fixtures.summary_json()


@settings(max_examples=200, deadline=None)
@given(
    value=st.floats(allow_nan=False, allow_infinity=False),
    latency=st.floats(min_value=0.0, allow_nan=False, allow_infinity=False),
)
def test_summary_floats_round_trip_bit_exactly(value: float, latency: float) -> None:
    document = json.loads(json.dumps(_BASE))
    document["protocol_error_reward"] = value
    document["stats"]["mean_episode_return"] = value
    document["stats"]["mean_model_latency_ms"] = abs(latency)
    data = serialize.summary_bytes(RolloutSummary.from_json(document))
    back = read_summary(data)
    assert bits_equal(back.protocol_error_reward, value)
    assert bits_equal(back.stats.mean_episode_return, value)
    assert serialize.summary_bytes(back) == data
