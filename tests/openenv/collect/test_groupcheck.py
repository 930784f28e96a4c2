"""The group's hidden-state check (`collect.groupcheck`): its verdict, its cost, its bytes.

Against the oracle (whose states are deterministic) the check must change nothing the
bundle records: the three files and the verification report are byte-identical with and
without it. It costs exactly one read-only `state` per candidate of a group of two or
more, between reset and the first policy call. The verdict itself is checked over every
order in which a group's candidates can arrive: always the lowest-indexed candidate that
differs from candidate 0, never a candidate that merely arrived first.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import EpisodeIdIgnored, ResetNondeterministic, UsageError
from kiln_verify.limits import MAX_ERROR_SNIPPET_CHARS, MAX_REPLAY_DRIFT_PATH_CHARS
from kiln_verify.openenv.collect import run_collection
from kiln_verify.openenv.collect.groupcheck import GroupCheck
from kiln_verify.openenv.collect.plan import GroupPlan
from kiln_verify.openenv.policy.base import PolicyRequest
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.protocol.session import Session
from kiln_verify.openenv.verify import verify_bundle
from oracle.runner import ServerHandle
from tests.openenv.collect.conftest import Start, files_in
from tests.openenv.collect.options import make_controls

PLAN = GroupPlan(3, 1, 7, {"seed": 7})
WHERE = "group 3 (environment 1, http://x, seed 7)"
FILES = ("openenv.rollouts.jsonl", "openenv.replay.json", "openenv.rollout-summary.json")


class _Start:
    """A stand-in for the engine's start: equal when the observation texts are."""

    def __init__(self, observation: str) -> None:
        self.observation = observation

    def same_as(self, other: _Start) -> bool:
        return self.observation == other.observation


def _state(secret: Any, episode_id: Any = None) -> dict[str, Any]:
    return {"episode_id": episode_id, "step_count": 0, "secret": secret}


def _run(
    arrivals: list[tuple[int, str, dict[str, Any]]], plan: GroupPlan = PLAN
) -> tuple[list[bool], ResetNondeterministic | EpisodeIdIgnored | None]:
    """Feed the arrivals in order; what each was told, and the error the last one raised."""
    check: GroupCheck[_Start] = GroupCheck(plan, len(arrivals), "http://x")
    told: list[bool] = []
    for index, observation, state in arrivals:
        try:
            told.append(check.arrive(index, _Start(observation), state))
        except (ResetNondeterministic, EpisodeIdIgnored) as exc:
            return told, exc
    return told, None


def _hidden(index: int, path: str = "state.secret") -> str:
    return (
        f"{WHERE}: candidate {index} got the same reset observation as candidate 0 but a "
        f"different hidden state (the state read right after reset differs first at "
        f"{path!r}); reset(seed) must be deterministic "
        "(conformance case determinism.fresh-session-same-seed)"
    )


def _observation(index: int) -> str:
    return (
        f"{WHERE}: candidate {index} got a different reset observation than candidate 0; "
        "reset(seed) must be deterministic (conformance case determinism.fresh-session-same-seed)"
    )


GROUPS: list[tuple[list[tuple[str, dict[str, Any]]], str | None]] = [
    # (each candidate's observation and state, the expected rule)
    ([("o", _state(1, "a")), ("o", _state(1, "b")), ("o", _state(1, "c"))], None),
    ([("o", _state(1)), ("o", _state(1)), ("o", _state(2)), ("o", _state(3))], _hidden(2)),
    ([("o", _state(1)), ("o", _state(2)), ("o", _state(2)), ("o", _state(2))], _hidden(1)),
    ([("o", _state(1)), ("o", _state(1)), ("p", _state(1)), ("o", _state(2))], _observation(2)),
    ([("o", _state(1)), ("o", _state(1)), ("o", _state(2)), ("p", _state(1))], _hidden(2)),
    # type-strict, as everywhere: 1, 1.0 and true are three different secrets
    ([("o", _state(1)), ("o", _state(1.0)), ("o", _state(True))], _hidden(1)),
    # presence and type of episode_id still count when the payload did not set it
    ([("o", _state(1, "a")), ("o", _state(1, "b")), ("o", _state(1, None))],
     _hidden(2, "state.episode_id")),
]  # fmt: skip


@pytest.mark.parametrize(("group", "expected"), GROUPS)
def test_every_arrival_order_gives_one_verdict(
    group: list[tuple[str, dict[str, Any]]], expected: str | None
) -> None:
    for order in itertools.permutations(range(len(group))):
        arrivals = [(index, *group[index]) for index in order]
        told, error = _run(arrivals)
        if expected is None:
            assert error is None, order
            assert told == [True] * len(group), order
            continue
        assert error is not None, order
        assert error.rule == expected, order
        assert error.code == "reset_nondeterministic"
        # once a difference has been seen, nobody else acts
        first_false = told.index(False) if False in told else len(told)
        assert all(not ok for ok in told[first_false:]), order


def _ignored(index: int) -> str:
    return (
        f"{WHERE}: candidate {index}: the reset payload named episode_id 'run-7' but the state "
        "read right after reset reports another; the server ignores a requested episode_id "
        "(conformance case ws.episode-id-echo)"
    )


NAMED = GroupPlan(3, 1, 7, {"episode_id": "run-7", "seed": 7})
IGNORED_GROUPS: list[tuple[list[tuple[str, dict[str, Any]]], str]] = [
    # candidate 1 keeps another id: its own finding, not a hidden-state difference
    ([("o", _state(1, "run-7")), ("o", _state(1, "other")), ("o", _state(1, "run-7"))],
     _ignored(1)),
    # every candidate ignores it (OpenEnv's uuid4 servers): candidate 0 is named
    ([("o", _state(1, "a")), ("o", _state(1, "b")), ("o", _state(1, "c"))], _ignored(0)),
    # a constant id that is not the requested one is ignored too, although all agree
    ([("o", _state(1, "x")), ("o", _state(1, "x"))], _ignored(0)),
    # the lowest-indexed finding wins: another observation at 1 before an id at 2
    ([("o", _state(1, "run-7")), ("p", _state(1, "run-7")), ("o", _state(1, "z"))],
     _observation(1)),
    # ... and an ignored id at 1 before a hidden state at 2
    ([("o", _state(1, "run-7")), ("o", _state(1, "z")), ("o", _state(2, "run-7"))],
     _ignored(1)),
    # type-strict: the number 7 is not the string "run-7", nor "7" the number 7
    ([("o", _state(1, "run-7")), ("o", _state(1, 7))], _ignored(1)),
]  # fmt: skip


def test_an_episode_id_the_payload_named_is_kept_or_refused_with_its_own_code() -> None:
    same = [(0, "o", _state(1, "run-7")), (1, "o", _state(1, "run-7"))]
    assert _run(same, NAMED) == ([True, True], None)
    # a state without episode_id does not contradict the request
    assert _run([(0, "o", {"step_count": 0}), (1, "o", {"step_count": 0})], NAMED)[1] is None
    for group, expected in IGNORED_GROUPS:
        for order in itertools.permutations(range(len(group))):
            _, error = _run([(index, *group[index]) for index in order], NAMED)
            assert error is not None, (group, order)
            assert error.rule == expected, (group, order)
            if expected.startswith(f"{WHERE}: candidate 1 got a different"):
                continue
            assert isinstance(error, EpisodeIdIgnored)
            assert error.code == "episode_id_ignored"
            assert error.fields == ("reset_templates",)
            assert error.hint is not None
            assert "leave episode_id out of `reset_templates`" in error.hint
            assert "seed" not in error.hint.split("(")[0]  # not "derive ... from the seed"
            assert error.drift == {
                "stage": "state", "environment_index": 1, "group_index": 3,
                "candidate_index": int(expected[len(WHERE) + 12]), "field": "state.episode_id",
            }  # fmt: skip


def test_a_hidden_state_names_the_case_and_the_escape() -> None:
    _, error = _run([(0, "o", _state(1)), (1, "o", _state(2))])
    assert isinstance(error, ResetNondeterministic)
    assert error.fields == ("state_check",)
    assert error.hint is not None
    assert error.hint.endswith("turn `state_check` off (--no-state-check)")
    _, error = _run([(0, "o", _state(1)), (1, "p", _state(1))])
    assert isinstance(error, ResetNondeterministic)
    assert error.fields == ()
    assert error.hint is not None
    assert "state_check" not in error.hint  # no escape from another observation


def test_the_path_is_bounded_and_values_are_never_echoed() -> None:
    key = "k" * 10_000
    secret = "s" * 10_000
    _, error = _run([(0, "o", {key: secret + "1"}), (1, "o", {key: secret + "2"})])
    assert error is not None
    assert len(str(error)) < 1_000
    assert "sss" not in str(error)
    shown = "state." + "k" * (MAX_ERROR_SNIPPET_CHARS - len("state."))
    # the path itself is cut at MAX_REPLAY_DRIFT_PATH_CHARS first (a peer key of any length)
    assert f"differs first at {shown!r}... ({MAX_REPLAY_DRIFT_PATH_CHARS} chars)); reset(seed)" in (
        error.rule
    )


# -- over real sockets: the oracle -----------------------------------------------------------


def _collect(
    directory: Path, urls: list[str], monkeypatch: pytest.MonkeyPatch, **options: Any
) -> None:
    """Collect into ``directory`` under the default relative names (so the summary's
    recorded paths, too, are the same in every directory)."""
    controls = make_controls(urls, groups=4, group_size=3, max_steps=3, thinking=False, **options)
    with monkeypatch.context() as patch:
        patch.chdir(directory)
        asyncio.run(run_collection(controls, RandomPolicy()))


def test_the_check_changes_no_byte_of_the_bundle(
    servers: dict[str, ServerHandle], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = [servers["bandit"].base_url, servers["counter"].base_url]
    reports = {}
    for mode, state_check in (("checked", True), ("unchecked", False)):
        directory = tmp_path / mode
        directory.mkdir()
        _collect(directory, urls, monkeypatch, state_check=state_check)
        report = verify_bundle(directory / FILES[2])
        # the report names the files it read by absolute path; everything else must agree
        reports[mode] = {k: v for k, v in report.to_json().items() if not k.endswith("_path")}
        assert (report.groups, report.rollouts) == (4, 12)
    for name in FILES:
        assert (tmp_path / "checked" / name).read_bytes() == (
            tmp_path / "unchecked" / name
        ).read_bytes(), name
    assert reports["checked"] == reports["unchecked"]


def _log_exchanges(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every `state` the collector sends, between the policy calls it makes."""
    log: list[str] = []
    real_state = Session.state

    async def state(self: Session) -> Any:
        log.append("state")
        return await real_state(self)

    monkeypatch.setattr(Session, "state", state)
    return log


def _acting(log: list[str]) -> ScriptedPolicy:
    def act(request: PolicyRequest) -> str:
        log.append(f"act {request.step_index}")
        return '{"arm": 1}'

    return ScriptedPolicy(act, name="arm-one")


@pytest.mark.parametrize(("state_check", "reads"), [(True, 2), (False, 1)])
def test_one_state_read_after_reset_before_the_first_policy_call(
    servers: dict[str, ServerHandle],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    state_check: bool,
    reads: int,
) -> None:
    log = _log_exchanges(monkeypatch)
    controls = make_controls(
        [servers["bandit"].base_url], groups=2, group_size=2, max_steps=2, concurrency=1,
        state_check=state_check, output=str(tmp_path / "d.jsonl"),
        replay_output=str(tmp_path / "r.json"), summary_output=str(tmp_path / "s.json"),
    )  # fmt: skip
    asyncio.run(run_collection(controls, _acting(log)))
    # one candidate at a time: its check's read (if any), its two actions, its final state
    episode = ["state"] * (reads - 1) + ["act 0", "act 1", "state"]
    assert log == episode * 4


def test_a_group_of_one_reads_no_extra_state(
    servers: dict[str, ServerHandle], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log_exchanges(monkeypatch)
    controls = make_controls(
        [servers["bandit"].base_url], groups=2, group_size=1, max_steps=1,
        output=str(tmp_path / "d.jsonl"), replay_output=str(tmp_path / "r.json"),
        summary_output=str(tmp_path / "s.json"),
    )  # fmt: skip
    asyncio.run(run_collection(controls, _acting(log)))
    assert log == ["act 0", "state"] * 2


@pytest.mark.parametrize("state_check", [True, False])
def test_a_different_reset_observation_keeps_its_message(
    start: Start, tmp_path: Path, state_check: bool
) -> None:
    handle = start("bandit", faults=["nondeterministic-reset"])
    controls = make_controls(
        [handle.base_url], groups=1, group_size=3, max_steps=1, state_check=state_check,
        output=str(tmp_path / "d.jsonl"), replay_output=str(tmp_path / "r.json"),
        summary_output=str(tmp_path / "s.json"),
    )  # fmt: skip
    with pytest.raises(ResetNondeterministic) as caught:
        asyncio.run(run_collection(controls, RandomPolicy()))
    assert caught.value.rule == (
        f"group 0 (environment 0, {handle.base_url}, seed 0): candidate 1 got a different "
        "reset observation than candidate 0; reset(seed) must be deterministic "
        "(conformance case determinism.fresh-session-same-seed)"
    )
    assert files_in(tmp_path) == []


def test_state_check_must_be_a_boolean() -> None:
    with pytest.raises(UsageError, match="`state_check` must be true or false"):
        make_controls(["http://127.0.0.1:1"], state_check="yes")
