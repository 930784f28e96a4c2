"""The ``orjson`` writers give our writers' bytes, or step aside for them.

``kiln_verify.core.jsonfastwrite`` (compact and pretty text of any tree),
``records/writefast`` (records laid out from their declared fields, without ``to_json``)
and the retained budget's sizing of parsed values are each compared with the reference
they replace: the same bytes, or the same error code and message. The checks that they
really take the fast route are here too, since a fast path that never runs would pass
every equality.
"""

from __future__ import annotations

import enum
import json
import math
import random
import re
import struct
from collections import OrderedDict
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kiln_verify.core import jsonfastwrite
from kiln_verify.core.jsonio import dumps_compact, dumps_pretty, loads
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_JSON_DEPTH
from kiln_verify.openenv.collect.plan import _SIZER, RetainedBudget, _may_differ
from kiln_verify.openenv.protocol.wire import Reward
from kiln_verify.openenv.records import writefast
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import (
    REPLAY_SCHEMA,
    ObservationResult,
    ProtocolErrorResult,
    ReplayCandidate,
    ReplayExchange,
    ReplayGroup,
    ReplayManifest,
)
from tests.openenv.collect.options import make_controls
from tests.openenv.records.fixtures import inspection


def _outcome(write: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", write(value)
    except KilnError as exc:
        return exc.code, str(exc)
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


# --- values -------------------------------------------------------------------------------

keys = st.text(max_size=6)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e16, 1e-5, 2.5e-5, 9.99e-5, 1e-4, 1e-7, -0.0, 5e-324, 1e300, 0.1]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63 - 3, max_value=2**64 + 3),
    floats,
    st.text(),
    st.sampled_from(["e-1", "1e-5", "0.0000", "x+1", '{"[', "\\", "\u2028", "\x7f"]),
)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=4),
        st.tuples(inner, inner),
    ),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(trees)
def test_compact_and_pretty_equal_the_reference(value: Any) -> None:
    assert _outcome(jsonfastwrite.compact_bytes, value) == _outcome(dumps_compact, value)
    assert _outcome(jsonfastwrite.pretty_bytes, value) == _outcome(dumps_pretty, value)


def test_every_code_point_is_escaped_alike() -> None:
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    assert jsonfastwrite.compact_orjson([text, {text: text}]) == dumps_compact([text, {text: text}])
    assert jsonfastwrite.pretty_orjson({text: [text]}) == dumps_pretty({text: [text]})


def test_floats_are_spelled_alike_or_refused() -> None:
    rng = random.Random(7)
    for _ in range(20000):
        value = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(value):
            fast = jsonfastwrite.compact_orjson([value])
            assert fast is None or fast == dumps_compact([value])
        # floats written without an exponent take the fast route
        plain = rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-3, 9)
        assert jsonfastwrite.compact_orjson([plain]) == dumps_compact([plain])


@pytest.mark.parametrize(
    "alphabet", [b'0123456789e+-x" ', b"e-+1", b"-e0", b"abcdefghijklmnopqrstuvwxyz 1e-+"]
)
def test_no_exponent_is_the_digit_e_sign_rule(alphabet: bytes) -> None:
    # short texts, and long ones with few signs (memchr per sign) or many (pair searches)
    rule = re.compile(rb"[0-9]e[-+]")
    rng = random.Random(11)
    for _ in range(20000):
        raw = bytes(rng.choices(alphabet, k=rng.choice((8, 80, 400))))  # one call per text
        assert jsonfastwrite.no_exponent(raw) is (rule.search(raw) is None), raw


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 300])
def test_depth_bound_is_the_reference_one(depth: int) -> None:
    value = {"k": _nested(depth - 1)} if depth > 1 else {}
    assert _outcome(jsonfastwrite.compact_bytes, value) == _outcome(dumps_compact, value)
    assert _outcome(jsonfastwrite.pretty_bytes, value) == _outcome(dumps_pretty, value)
    # brackets inside strings defeat the count and take the pretty check
    quoted = ["[{" * 200, value]
    assert _outcome(jsonfastwrite.compact_bytes, quoted) == _outcome(dumps_compact, quoted)
    # text long enough to skip the count goes straight to the pretty check
    long = ["x" * 40_000, value]
    assert _outcome(jsonfastwrite.compact_bytes, long) == _outcome(dumps_compact, long)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1: "int key"},
        {"a": 2**70},
        {"s": "\ud800"},
        {"i": Level.HIGH},
        {"t": Text("sub")},
        OrderedDict(a=1),
        {"b": b"bytes"},
        {"set": {1}},
        [1.5e-7, 2e16, 3e-5],
    ],
)
def test_unusual_values_take_the_reference(value: Any) -> None:
    assert _outcome(jsonfastwrite.compact_bytes, value) == _outcome(dumps_compact, value)
    assert _outcome(jsonfastwrite.pretty_bytes, value) == _outcome(dumps_pretty, value)


def test_plain_values_take_the_fast_route() -> None:
    value = {"observation": {"text": 'sha256:5e2 episode-1 {"a": [1]}', "n": [1, 2.5]}}
    assert jsonfastwrite.compact_orjson(value) == dumps_compact(value)
    assert jsonfastwrite.pretty_orjson(value) == dumps_pretty(value)
    assert jsonfastwrite.compact_orjson([1e-7]) is None
    assert jsonfastwrite.pretty_orjson([1e16]) is None


# --- the retained budget -------------------------------------------------------------------


@settings(max_examples=600, deadline=None)
@given(trees)
# more than _SIGNS_LOOKED_AT minus signs before a 1e-5 <= |x| < 1e-4 float (orjson writes
# it 0.00001, the sizer 1e-05): found by this property once, kept as an explicit example
@example([1e-05, {"--": None, "0--": None}, {"0--": None, "--": -1}])
def test_parsed_values_are_charged_as_before(value: Any) -> None:
    try:
        parsed = loads(dumps_compact(value), max_bytes=1 << 20)
    except KilnError:
        return
    plain, fast = RetainedBudget(), RetainedBudget()
    plain.charge(parsed, None, what="x")
    fast.charge_parsed(parsed, None, what="x")
    assert fast.used == plain.used == len(_SIZER.encode(parsed).encode("utf-8")) + 4


@pytest.mark.parametrize(
    "value",
    [[1e-5], [9.99e-5], [1e-4], [1e-7], [1.5e-300], [1e16], [2**64], {"k": "0.0000 e-5"}],
)
def test_charge_parsed_near_the_float_rules(value: Any) -> None:
    plain, fast = RetainedBudget(), RetainedBudget()
    plain.charge(value, what="x")
    fast.charge_parsed(value, what="x")
    assert fast.used == plain.used


def test_size_markers_are_the_three_substrings() -> None:
    rng = random.Random(3)
    for _ in range(50000):
        raw = bytes(rng.choice(b"e+-0.x") for _ in range(rng.randint(0, 24)))
        expected = b"e-" in raw or b"e+" in raw or b"0.0000" in raw
        assert _may_differ(raw) is expected, raw


def test_charge_parsed_trips_where_charge_does() -> None:
    value = {"text": "abc", "n": [1, 2.5, 1e-7]}
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    for bound in (size - 1, size, size + 1):
        plain, fast = RetainedBudget(bound), RetainedBudget(bound)
        assert _outcome(lambda v, b=plain: b.charge(v, what="x"), value) == _outcome(
            lambda v, b=fast: b.charge_parsed(v, what="x"), value
        )


# --- records -------------------------------------------------------------------------------


def _observation(payload: Any, metadata: Any = None, reward: Any = 0.5) -> ObservationRecord:
    return ObservationRecord(
        observation=payload, reward=Reward.from_json(reward), done=False, metadata=metadata
    )


PAYLOADS: list[Any] = [
    {"input_text": "pull an arm", "legal_actions": [0, 1, 2], "metadata": {}},
    {"z": 1, "a": {"y": [1, {"b": None, "a": True}], "x": "é"}, "\ue000": 1, "\U00010000": 2},
    {"f": [0.1, -0.0, 1e-7, 2.5e16]},
    {"big": 2**65, "nan": math.nan, "tuple": (1, 2)},
    {"nan": math.nan, "inf": [math.inf, -math.inf], "tuple": (1, "2")},
    {"sub": Text("t"), "level": Level.HIGH, "colour": Colour.RED},
    "a string observation",
    [1, "two", None],
    {"deep": _nested(MAX_JSON_DEPTH - 5)},
    {"deeper": _nested(MAX_JSON_DEPTH + 2)},
]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("metadata", [None, {"m": [1, 2]}, {"b": 1, "a": 2}])
def test_observation_compact_is_to_json_compact(payload: Any, metadata: Any) -> None:
    record = _observation(payload, metadata)
    assert _outcome(writefast.observation_compact, record) == _outcome(
        lambda r: dumps_compact(r.to_json()), record
    )


def _manifest(payload: Any, *, final_state: Any = None, unset: bool = False) -> ReplayManifest:
    reset = _observation(payload, {"seed": 3})
    exchanges = [
        ReplayExchange(
            step_index=0,
            action={"b": 1, "a": [payload]},
            result=ObservationResult(observation=_observation(payload, reward=1)),
        ),
        ReplayExchange(
            step_index=1,
            action={"arm": 2},
            result=ProtocolErrorResult(
                error=ProtocolErrorRecord(
                    code="VALIDATION_ERROR",
                    message="bad arm",
                    errors=[{"z": 1, "a": payload}],
                    active_sessions=1,
                    max_sessions=4,
                    factory_name="f",
                ),
                continued=True,
            ),
        ),
        ReplayExchange(
            step_index=2,
            action={},
            result=ObservationResult(observation=_observation(payload, reward=None)),
        ),
    ]
    state = {} if unset else {"final_state": final_state}
    candidate = ReplayCandidate(
        candidate_index=0,
        exchanges=exchanges,
        **state,
        episode_return=1.5,
        terminal_done=False,
        termination="max_steps",
        recoverable_protocol_errors=1,
        capacity_retries=0,
        model_tokens=7,
        model_latency_ms=0.25,
    )
    environment = EnvironmentInspection.from_json(inspection())
    return ReplayManifest(
        schema=REPLAY_SCHEMA,
        dataset_sha256="sha256:" + "0" * 64,
        protocol_error_reward=-1.0,
        max_steps=3,
        environments=[environment],
        groups=[
            ReplayGroup(
                group_index=0,
                environment_index=0,
                seed=3,
                reset_payload={"seed": 3, "a": payload},
                reset_observation=reset,
                candidates=[candidate, candidate.model_copy()],
            )
        ],
    )


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("final_state", [None, {"y": 1, "x": [2.5]}, "unset"])
def test_replay_bytes_are_the_reference_bytes(payload: Any, final_state: Any) -> None:
    manifest = _manifest(payload, final_state=final_state, unset=final_state == "unset")
    fast = _outcome(writefast.record_pretty, manifest)
    reference = _outcome(lambda m: dumps_pretty(m.to_json()), manifest)
    assert fast == reference


def test_the_derived_layout_is_taken_for_plain_manifests() -> None:
    manifest = _manifest(PAYLOADS[0], final_state={"pulls": 3})
    tree = writefast._tree(manifest, 0)  # raises where the layout steps aside
    data = orjson.dumps(tree, default=writefast._pretty_free, option=jsonfastwrite.PRETTY) + b"\n"
    assert data == writefast.record_pretty(manifest) == dumps_pretty(manifest.to_json())
    assert orjson.loads(data)["groups"][0]["candidates"][0]["final_state"] == {"pulls": 3}


# --- a whole collection ---------------------------------------------------------------------


def test_collected_bundles_are_the_reference_bytes(
    servers: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both environments, valid, schema-invalid, unparsable and empty actions: the three
    files equal what the reference writers make of the same collection."""
    import asyncio

    from kiln_verify.openenv.collect import build_bundle, collect
    from kiln_verify.openenv.collect.bundle import WrittenGroup
    from kiln_verify.openenv.policy.scripted import ScriptedPolicy
    from kiln_verify.openenv.records import serialize
    from tests.openenv.collect.conftest import outputs

    texts = ['{"arm": 1}', '{"amount": 2}', '{"arm": 3, "x": [1.5e-7]}', "nope", '{"arm": -1}', ""]
    policy = ScriptedPolicy(lambda request: texts[(request.step_index + request.seed) % len(texts)])
    options: dict[str, Any] = {"groups": 6, "group_size": 2, "max_steps": 4, **outputs(tmp_path)}
    controls = make_controls(
        [servers["bandit"].base_url, servers["counter"].base_url],
        thinking=False,
        max_recoverable_errors=1,
        **options,
    )
    collection = asyncio.run(collect(controls, policy))
    fast = build_bundle(collection)
    # the journal's path: groups written as they ended (None: read back; the last: missing)
    written = [WrittenGroup.of(group) for group in collection.groups]
    handed = build_bundle(collection, written=[None, *written[1:-1]])
    assert (handed.dataset, handed.replay, handed.summary) == (
        fast.dataset,
        fast.replay,
        fast.summary,
    )
    assert writefast.record_pretty is serialize.record_pretty  # type: ignore[attr-defined]
    monkeypatch.setattr(serialize, "record_pretty", lambda record: dumps_pretty(record.to_json()))
    monkeypatch.setattr(serialize, "compact_bytes", dumps_compact)
    monkeypatch.setattr(serialize, "pretty_bytes", dumps_pretty)
    monkeypatch.setattr(serialize, "observation_compact", lambda r: dumps_compact(r.to_json()))
    reference = build_bundle(collection)
    assert (fast.dataset, fast.replay, fast.summary) == (
        reference.dataset,
        reference.replay,
        reference.summary,
    )
