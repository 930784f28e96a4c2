"""Group integrity over whole groups: candidate 0's digests are computed once per group and
reused for every later candidate, so a mismatch anywhere in the group must still be found,
named by the first differing candidate, exactly when the two digests say so."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from kiln_verify.errors import ResetNondeterministic
from kiln_verify.openenv.collect import engine
from kiln_verify.openenv.collect.engine import _check_integrity
from kiln_verify.openenv.collect.episode import EpisodeResult
from kiln_verify.openenv.collect.plan import GroupPlan
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.prompt import initial_messages
from kiln_verify.openenv.records.serialize import messages_sha256, reset_observation_sha256
from kiln_verify.records import ChatMessage
from oracle.runner import ServerHandle
from tests.openenv.collect.contexts import environment_context
from tests.openenv.collect.test_fastpaths import OBSERVATIONS, _record

PLAN = GroupPlan(3, 0, 7, {"seed": 7})


def _episode(index: int, messages: list[ChatMessage], reset: ObservationRecord) -> EpisodeResult:
    # _check_integrity reads only these three members of an episode.
    fields = SimpleNamespace(candidate_index=index, messages=messages, reset_observation=reset)
    return cast(EpisodeResult, fields)


Start = tuple[list[ChatMessage], ObservationRecord]


def _same(left: Start, right: Start) -> bool:
    return messages_sha256(left[0]) == messages_sha256(right[0]) and (
        reset_observation_sha256(left[1]) == reset_observation_sha256(right[1])
    )


def test_a_mismatch_after_equal_candidates_is_found(servers: dict[str, ServerHandle]) -> None:
    env = environment_context(servers["bandit"].base_url)
    records = [_record(observation, metadata) for observation, metadata in OBSERVATIONS]
    starts = [(initial_messages(env.inspection, record), record) for record in records]
    refused = 0
    for first in starts:
        for last in starts:
            # candidates 0 and 1 identical, candidate 2 possibly different
            group = [_episode(i, *start) for i, start in enumerate([first, first, last])]
            if _same(first, last):
                _check_integrity(PLAN, group, "http://x")
                continue
            refused += 1
            with pytest.raises(ResetNondeterministic, match=r"group 3 .* candidate 2 got"):
                _check_integrity(PLAN, group, "http://x")
    assert refused == len(starts) ** 2 - len(starts) - 2


def test_candidate_zero_is_digested_once_per_group(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment_context(servers["bandit"].base_url)
    record = _record({"input_text": "same prompt", "x": 2})  # no shortcut: digests compared
    messages = initial_messages(env.inspection, record)
    digested: list[int] = []

    def counting(observation: ObservationRecord) -> str:
        digested.append(id(observation))
        return str(reset_observation_sha256(observation))

    monkeypatch.setattr(engine, "reset_observation_sha256", counting)
    copies = [_record({"input_text": "same prompt", "x": 2}) for _ in range(3)]
    group = [_episode(0, messages, record)] + [
        _episode(i + 1, initial_messages(env.inspection, copy), copy)
        for i, copy in enumerate(copies)
    ]
    _check_integrity(PLAN, group, "http://x")
    assert digested.count(id(record)) == 1
    assert sorted(digested[1:]) == sorted(id(copy) for copy in copies)
