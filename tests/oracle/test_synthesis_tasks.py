"""The four synthesis tasks (dyna, inducto, logic, filtro), tested against the classes.

Besides the text-profile contract of the interop gate, each task is shown to be genuinely
playable: an independent solver that reads only observations wins (or the revealed
answers of one run win a replay), and the feedback each task gives is checked against the
rule it reveals.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from oracle.base import Environment, ExecutionError, Outcome
from oracle.inventory import TASKS, environment_class
from oracle.rng import SplitMix64, derive_seed

ROOT = Path(__file__).resolve().parents[2]
CLASSES: dict[str, type[Environment]] = {name: environment_class(name) for name in TASKS}
CATALOGUED = ("inducto", "logic")
REWARD_TYPES: Mapping[str, type] = {"dyna": float, "inducto": int, "logic": int, "filtro": float}
ACTION_FIELDS = {
    "dyna": ("prediction", "integer"),
    "inducto": ("next_value", "integer"),
    "logic": ("assignment", "string"),
    "filtro": ("label", "integer"),
}


def random_action(name: str, observation: Mapping[str, Any], rng: SplitMix64) -> dict[str, Any]:
    """A seeded, always-valid action (post-done observations still yield one)."""
    if name == "dyna":
        return {"prediction": rng.below(observation["modulus"])}
    if name == "inducto":
        return {"next_value": observation["terms"][-1] + rng.below(5) - 2}
    if name == "logic":
        return {"assignment": "".join(rng.choice("TF") for _ in range(observation["variables"]))}
    return {"label": rng.below(2)}


def play(name: str, payload: Mapping[str, Any], steps: int = 50) -> list[Any]:
    """Reset, then `steps` seeded actions through `Environment.step` (frozen after done)."""
    env = CLASSES[name]()
    out = env.reset(payload)
    rng = SplitMix64(derive_seed(int(payload.get("seed", 0)), "test-policy", name))
    rows: list[Any] = [[out.observation, out.reward, out.done, env.state()]]
    for _ in range(steps):
        out = env.step(random_action(name, out.observation, rng))
        rows.append([out.observation, out.reward, out.done, env.state()])
    return rows


def validate_observation(cls: type[Environment], observation: Mapping[str, Any]) -> None:
    """Every declared field present, nothing else, Draft 2020-12; `integer` is a Python int."""
    schema = {
        "type": "object",
        "properties": {field.name: dict(field.schema) for field in cls.observation_fields},
        "required": [field.name for field in cls.observation_fields],
        "additionalProperties": False,
    }
    jsonschema.Draft202012Validator(schema).validate(observation)
    for field in cls.observation_fields:
        kinds = field.schema.get("type")
        value = observation[field.name]
        if value is not None and "integer" in (kinds if isinstance(kinds, list) else [kinds]):
            assert type(value) is int, field.name
    json.dumps(observation, allow_nan=False)


# -- contract ------------------------------------------------------------------------------


def test_metadata() -> None:
    for name, cls in CLASSES.items():
        assert cls.server_name == name
        assert cls.env_name == f"{name}_env"
        assert cls.class_name == f"{name.capitalize()}Environment" == cls.__name__
        assert cls.category == "task"
        assert [(f.name, f.type) for f in cls.action_fields] == [ACTION_FIELDS[name]]
        names = [field.name for field in cls.observation_fields]
        assert "input_text" in names
        assert len(names) == len(set(names))
        assert not set(names) & {"done", "reward", "metadata"}
        assert cls.description.strip()


@pytest.mark.parametrize("name", TASKS)
def test_text_profile_reset(name: str) -> None:
    for i in range(4):
        env = CLASSES[name]()
        episode = f"kiln-text-profile-{i}"
        out = env.reset({"seed": 10000 + i, "difficulty": 2, "episode_id": episode})
        assert out.observation["input_text"].strip()
        assert out.reward is None
        assert out.done is False
        assert env.state()["episode_id"] == episode
        assert env.state()["step_count"] == 0


@pytest.mark.parametrize("name", TASKS)
def test_episodes_rewards_and_frozen_terminal(name: str) -> None:
    cls = CLASSES[name]
    for difficulty, seed in itertools.product(range(1, 6), range(6)):
        rows = play(name, {"seed": seed, "difficulty": difficulty}, steps=50)
        finished = [i for i, row in enumerate(rows) if row[2]]
        assert finished, "every episode ends within 50 steps"
        end = finished[0]
        assert 1 <= end <= 50
        for observation, reward, _done, _state in rows[1 : end + 1]:
            assert type(reward) is REWARD_TYPES[name]
            validate_observation(cls, observation)
            assert observation["input_text"].strip()
        validate_observation(cls, rows[0][0])
        terminal = rows[end][0]
        for observation, reward, done, _state in rows[end + 1 :]:
            assert observation == terminal
            assert reward is None
            assert done is True
        assert rows[-1][3]["step_count"] == 50


@pytest.mark.parametrize("name", TASKS)
def test_transcripts_are_deterministic(name: str) -> None:
    for difficulty in range(1, 6):
        payload = {"seed": 777 + difficulty, "difficulty": difficulty, "episode_id": "det"}
        assert json.dumps(play(name, payload)) == json.dumps(play(name, payload))
    one = play(name, {"seed": 1, "difficulty": 3})
    other = play(name, {"seed": 2, "difficulty": 3})
    assert one[0][0]["input_text"] != other[0][0]["input_text"]


def test_transcripts_match_in_a_fresh_process() -> None:
    cases = [(n, {"seed": 4242 + i, "difficulty": 1 + 2 * i % 5}) for i, n in enumerate(TASKS)]
    script = (
        "import json, sys\n"
        "sys.path.insert(0, 'tests/oracle')\n"
        "from test_synthesis_tasks import play\n"
        "print(json.dumps([play(n, p) for n, p in json.loads(sys.argv[1])]))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "987"}
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(cases)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    here = [play(name, payload) for name, payload in cases]
    assert result.stdout.strip() == json.dumps(here)


@pytest.mark.parametrize("name", TASKS)
def test_bad_actions_are_execution_errors(name: str) -> None:
    env = CLASSES[name]()
    field, kind = ACTION_FIELDS[name]
    with pytest.raises(ExecutionError):
        env.step({field: 0 if kind == "integer" else "T"})
    env.reset({"seed": 3, "difficulty": 3})
    bad: dict[str, list[Any]] = {
        "dyna": [-1, 10**6, "3", True, None],
        "inducto": [10**16, "3", 2.0, None],
        "logic": ["", "TFX", "TFTFTF", 5, "T F T F T"],
        "filtro": [2, -1, "1", True],
    }
    for value in bad[name]:
        with pytest.raises(ExecutionError):
            env.step({field: value})
    assert env.step_count == 0
    assert not env.done


def test_difficulty_scales_every_task() -> None:
    def first(name: str, difficulty: int) -> dict[str, Any]:
        return dict(CLASSES[name]().reset({"seed": 5, "difficulty": difficulty}).observation)

    def length(name: str, difficulty: int) -> int:
        return sum(
            1 for row in play(name, {"seed": 5, "difficulty": difficulty}) if row[1] is not None
        )

    for name in TASKS:
        lengths = [length(name, d) for d in range(1, 6)]
        assert lengths == sorted(lengths), (name, lengths)
        assert lengths[0] < lengths[-1] <= 50
    assert [first("logic", d)["variables"] for d in range(1, 6)] == [3, 4, 5, 6, 8]
    assert [first("inducto", d)["rounds"] for d in range(1, 6)] == [4, 5, 6, 7, 8]
    assert [first("dyna", d)["rule_form"].count("x[") for d in (1, 3, 5)] == [2, 2, 3]
    assert max(first("dyna", 1)["history"]) < 20 <= first("dyna", 5)["modulus"]
    assert max(e["item"] for e in first("filtro", 5)["examples"]) >= 100


# -- dyna ----------------------------------------------------------------------------------


def dyna_candidates(form: str, modulus: int, history: Sequence[int]) -> list[tuple[int, int, int]]:
    """Every (a, b, c) consistent with the revealed history, by brute force."""
    order = form.count("x[") - 1
    a_values = [1] if order == 1 and "a*" not in form else range(1, modulus)
    c_values = range(1, modulus) if order == 2 else [0]
    start = 2 if order == 2 else 1
    found = []
    for a, c in itertools.product(a_values, c_values):
        # b is forced by the first transition; check the rest.
        prev = history[start - 2] if start == 2 else 0
        b = (history[start] - a * history[start - 1] - c * prev) % modulus
        if all(
            history[t]
            == (a * history[t - 1] + c * (history[t - 2] if order == 2 else 0) + b) % modulus
            for t in range(start, len(history))
        ):
            found.append((a, b, c))
    return found


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4])
def test_dyna_is_solvable_by_inference(difficulty: int) -> None:
    for seed in range(3):
        env = CLASSES["dyna"]()
        obs = env.reset({"seed": seed, "difficulty": difficulty}).observation
        rewards: list[float] = []
        done = False
        while not done:
            m, history = obs["modulus"], obs["history"]
            order = obs["rule_form"].count("x[") - 1
            a, b, c = dyna_candidates(obs["rule_form"], m, history)[0]
            prev = history[-2] if order == 2 else 0
            out = env.step({"prediction": (a * history[-1] + c * prev + b) % m})
            obs, done = out.observation, out.done
            assert isinstance(out.reward, float)
            rewards.append(out.reward)
        assert rewards.count(1.0) >= len(rewards) - 2
        assert obs["exact"] == rewards.count(1.0)
        assert obs["total_reward"] == pytest.approx(sum(rewards))


def test_dyna_partial_credit_is_circular_distance() -> None:
    env = CLASSES["dyna"]()
    obs = env.reset({"seed": 8, "difficulty": 2}).observation
    m = obs["modulus"]
    out = env.step({"prediction": 0})
    actual = out.observation["last_actual"]
    distance = min(actual, m - actual)
    # 1 - d/(m//2), correctly rounded: one float division of exact integers.
    assert out.reward == (m // 2 - distance) / (m // 2)
    assert out.observation["history"][-1] == actual


# -- inducto -------------------------------------------------------------------------------


def differences(terms: Sequence[int]) -> list[int]:
    return [b - a for a, b in itertools.pairwise(terms)]


RULE_CHECKS: dict[str, Callable[[list[int]], bool]] = {
    "arithmetic": lambda t: len(set(differences(t))) == 1,
    "geometric": lambda t: all(t[i] * t[1] == t[i + 1] * t[0] for i in range(len(t) - 1)),
    "alternating steps": lambda t: (
        len(set(differences(t)[::2])) == len(set(differences(t)[1::2])) == 1
    ),
    "quadratic": lambda t: len(set(differences(differences(t)))) == 1,
    "sum of previous two": lambda t: all(t[i] == t[i - 1] + t[i - 2] for i in range(2, len(t))),
    "multiply then add": lambda t: any(
        all(t[i] == r * t[i - 1] + (t[1] - r * t[0]) for i in range(1, len(t))) for r in (2, 3)
    ),
    "two interleaved progressions": lambda t: (
        len(set(differences(t[::2]))) == 1 and len(set(differences(t[1::2]))) == 1
    ),
    "cubic": lambda t: len(set(differences(differences(differences(t))))) == 1,
    "sum of previous three": lambda t: all(
        t[i] == t[i - 1] + t[i - 2] + t[i - 3] for i in range(3, len(t))
    ),
}


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_inducto_revealed_rules_fit_and_replay_wins(difficulty: int) -> None:
    for seed in range(4):
        payload = {"seed": seed, "difficulty": difficulty}
        env = CLASSES["inducto"]()
        obs = env.reset(payload).observation
        answers = []
        done = False
        while not done:
            terms = obs["terms"]
            out = env.step({"next_value": terms[-1] - 10**9})
            obs, done = out.observation, out.done
            assert out.reward == 0
            answers.append(obs["last_answer"])
            assert RULE_CHECKS[obs["last_rule"]]([*terms, obs["last_answer"]]), obs["last_rule"]
        replay = CLASSES["inducto"]()
        replay.reset(payload)
        rewards = [replay.step({"next_value": value}).reward for value in answers]
        assert rewards == [1] * len(answers)
        assert all(type(r) is int for r in rewards)


# -- logic ---------------------------------------------------------------------------------


def clause_holds(clause: str, values: Sequence[bool]) -> bool:
    literals = clause.strip("()").split(" or ")
    for literal in literals:
        negated = literal.startswith("not ")
        index = int(literal.removeprefix("not ").removeprefix("x")) - 1
        if values[index] != negated:
            return True
    return False


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_logic_feedback_and_solution(difficulty: int) -> None:
    for seed in range(3):
        payload = {"seed": seed, "difficulty": difficulty}
        env = CLASSES["logic"]()
        obs = env.reset(payload).observation
        n, clauses = obs["variables"], obs["clauses"]
        rng = SplitMix64(seed)
        guess = [rng.below(2) == 1 for _ in range(n)]
        text = "".join("1" if v else "0" for v in guess).lower()
        out = env.step({"assignment": f" {text}\n"})
        expected = [i for i, c in enumerate(clauses, 1) if not clause_holds(c, guess)]
        assert out.observation["violated"] == expected
        assert out.reward == (0 if expected else 1)
        assert out.observation["last_assignment"] == "".join("T" if v else "F" for v in guess)
        solution = next(
            values
            for values in itertools.product((False, True), repeat=n)
            if all(clause_holds(c, values) for c in clauses)
        )
        fresh = CLASSES["logic"]()
        fresh.reset(payload)
        won = fresh.step({"assignment": "".join("t" if v else "F" for v in solution)})
        assert won.done
        assert won.reward == 1
        assert type(won.reward) is int
        assert won.observation["solved"] is True


def test_logic_runs_out_of_attempts() -> None:
    env = CLASSES["logic"]()
    obs = env.reset({"seed": 11, "difficulty": 5}).observation
    n, clauses = obs["variables"], obs["clauses"]
    losing = next(
        values
        for values in itertools.product((False, True), repeat=n)
        if not all(clause_holds(c, values) for c in clauses)
    )
    text = "".join("T" if v else "F" for v in losing)
    attempts = obs["attempts_left"]
    outs: list[Outcome] = [env.step({"assignment": text}) for _ in range(attempts)]
    assert [o.done for o in outs] == [False] * (attempts - 1) + [True]
    assert {o.reward for o in outs} == {0}
    assert outs[-1].observation["attempts_left"] == 0
    assert env.step({"assignment": text}).reward is None


# -- filtro --------------------------------------------------------------------------------


ATOMS: list[tuple[str, Callable[[tuple[str, ...]], Callable[[int], bool]]]] = [
    (r"even", lambda g: lambda x: x % 2 == 0),
    (r"odd", lambda g: lambda x: x % 2 == 1),
    (r"greater than (\d+)", lambda g: lambda x: x > int(g[0])),
    (r"less than (\d+)", lambda g: lambda x: x < int(g[0])),
    (r"divisible by (\d+)", lambda g: lambda x: x % int(g[0]) == 0),
    (r"between (\d+) and (\d+) inclusive", lambda g: lambda x: int(g[0]) <= x <= int(g[1])),
    (r"last digit is (\d), (\d) or (\d)", lambda g: lambda x: str(x)[-1] in g),
    (
        r"digit sum is (odd|even)",
        lambda g: lambda x: sum(int(d) for d in str(x)) % 2 == (g[0] == "odd"),
    ),
    (
        r"last digit greater than the tens digit",
        lambda g: lambda x: int(f"{x:02d}"[-1]) > int(f"{x:02d}"[-2]),
    ),
]


def atom(text: str) -> Callable[[int], bool]:
    for pattern, build in ATOMS:
        if m := re.fullmatch(pattern, text):
            return build(m.groups())
    raise AssertionError(f"unknown rule {text!r}")


def parse_rule(text: str) -> Callable[[int], bool]:
    if m := re.fullmatch(r"\((.+)\) (and|or) \((.+)\)", text):
        a, b = atom(m[1]), atom(m[3])
        if m[2] == "and":
            return lambda x: a(x) and b(x)
        return lambda x: a(x) or b(x)
    if m := re.fullmatch(r"exactly one of \((.+)\), \((.+)\)", text):
        a, b = atom(m[1]), atom(m[2])
        return lambda x: a(x) != b(x)
    return atom(text)


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_filtro_labels_follow_the_revealed_rule(difficulty: int) -> None:
    for seed in range(5):
        payload = {"seed": seed, "difficulty": difficulty}
        rows = play("filtro", payload)
        final = next(row[0] for row in rows if row[2])
        rule = parse_rule(final["rule"])
        assert all(int(rule(e["item"])) == e["label"] for e in final["examples"])
        labels = [e["label"] for e in final["examples"]]
        assert 0 < sum(labels) < len(labels)
        start = rows[0][0]
        asked = [e["label"] for e in final["examples"][len(start["examples"]) :]]
        replay = CLASSES["filtro"]()
        replay.reset(payload)
        assert [replay.step({"label": label}).reward for label in asked] == [1.0] * len(asked)


# -- Task API ------------------------------------------------------------------------------


def test_task_api_presence() -> None:
    for name in ("dyna", "filtro"):
        assert CLASSES[name].task_splits() is None
    for name in CATALOGUED:
        assert CLASSES[name].reset_options == frozenset({"split", "index"})


@pytest.mark.parametrize("name", CATALOGUED)
def test_task_api_catalog(name: str) -> None:
    cls = CLASSES[name]
    splits = cls.task_splits()
    assert splits is not None
    assert [dict(s) for s in splits] == [
        {"name": "train", "type": "train"},
        {"name": "validation", "type": "validation"},
        {"name": "test", "type": "test"},
    ]
    seen: set[int] = set()
    for split in ("train", "validation", "test"):
        rows = cls.task_rows(split)
        assert 100 <= len(rows) <= 500
        assert json.loads(json.dumps(rows)) == list(rows) == list(cls.task_rows(split))
        seeds = {row["seed"] for row in rows}
        assert len(seeds) == len(rows)
        assert not seeds & seen
        seen |= seeds
        for index in (0, 13, len(rows) - 1):
            row = rows[index]
            by_row = cls()
            first = by_row.reset({"split": split, "index": index, "seed": 3, "difficulty": 5})
            by_seed = cls().reset({"seed": row["seed"], "difficulty": row["difficulty"]})
            assert first.observation == by_seed.observation
            text = first.observation["input_text"].encode("utf-8")
            assert hashlib.sha256(text).hexdigest() == row["input_text_sha256"]
            assert by_row.state()["task"] == {"split": split, "index": index}
    with pytest.raises(KeyError):
        cls.task_rows("nope")
    for bad in ({"split": "test", "index": 100}, {"split": "nope"}, {"index": 0}):
        with pytest.raises(ExecutionError):
            cls().reset(bad)
