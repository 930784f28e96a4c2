"""Contract tests shared by the counter and the ten games, run directly against the classes.

They pin what Kiln's interop tests assert against any oracle server (text profile, one
action field, reward shapes) and what our own replay checks rely on: the same reset and
actions give byte-identical transcripts, in this process and in a fresh one with a
different hash seed; every observation is plain JSON that its advertised schema accepts.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from oracle.base import Environment, ExecutionError
from oracle.envs import _gamekit as kit
from oracle.envs.wordle import WORDS
from oracle.inventory import GAMES, environment_class
from oracle.rng import SplitMix64

ALL = ("counter", *GAMES)
#: The Python type of every non-null reward each environment produces.
REWARD_TYPES: Mapping[str, type] = {
    "counter": float,
    "bandit": int,
    "cartpole": float,
    "snake": int,
    "g2048": int,
    "wordle": int,
    "blackjack": float,
    "maze": int,
    "pong": int,
    "connect4": int,
    "kuhn": int,
}
CATEGORY = {"counter": "counter", **dict.fromkeys(GAMES, "game")}


def _strict_validator() -> Any:
    """Draft 2020-12 where `integer` means a Python int (jsonschema also accepts 1.0).

    jsonschema ships no type stubs and this project does not pin `types-jsonschema`, so
    it is imported dynamically and used as `Any` rather than silencing mypy with an ignore.
    """
    jsonschema: Any = importlib.import_module("jsonschema")
    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _c, value: type(value) is int)
    return jsonschema.validators.extend(base, type_checker=checker)


STRICT = _strict_validator()


def observation_schema(cls: type[Environment]) -> dict[str, Any]:
    """The object schema a server would advertise for `cls`'s observations (closed)."""
    return {
        "type": "object",
        "properties": {f.name: dict(f.schema) for f in cls.observation_fields},
        "required": [f.name for f in cls.observation_fields],
        "additionalProperties": False,
    }


def random_action(name: str, observation: Mapping[str, Any], rng: SplitMix64) -> dict[str, Any]:
    """A seeded action, valid nine times in ten; the tenth probes the error path."""
    cls = environment_class(name)
    if name == "counter":
        return {"amount": rng.below(4) - 1, "note": f"n{rng.below(10)}"}
    field = cls.action_fields[0]
    if rng.below(10) == 0:
        return {field.name: 99 if field.type == "integer" else "nonsense"}
    legal = observation.get("legal_actions")
    if legal:
        return {field.name: rng.choice(legal)}
    if name == "maze":
        return {"move": rng.below(4)}
    if name == "wordle":
        return {"guess": rng.choice(WORDS)}
    raise AssertionError(f"{name} needs a random action rule")


def transcript(name: str, seed: int, difficulty: int, steps: int = 50) -> list[Any]:
    """Everything an environment says over `steps` seeded actions, resetting after done."""
    env = environment_class(name)()
    rng = SplitMix64(seed ^ 0x5EED)
    episode = 0
    log: list[Any] = []

    def reset() -> Mapping[str, Any]:
        payload = {"seed": seed + episode, "difficulty": difficulty, "episode_id": f"e{episode}"}
        out = env.reset(payload)
        log.append(["reset", payload, out.observation, out.reward, out.done, env.state()])
        return out.observation

    observation = reset()
    for _ in range(steps):
        action = random_action(name, observation, rng)
        try:
            out = env.step(action)
        except ExecutionError as exc:
            log.append(["error", action, str(exc), env.state()])
            continue
        log.append(["step", action, out.observation, out.reward, out.done, env.state()])
        observation = out.observation
        if out.done:
            episode += 1
            observation = reset()
    return log


def digest(log: list[Any]) -> str:
    text = json.dumps(log, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("name", ALL)
def test_identity_matches_inventory(name: str) -> None:
    cls = environment_class(name)
    assert cls.server_name == name
    assert cls.env_name == f"{name}_env"
    assert cls.class_name == cls.__name__
    assert cls.category == CATEGORY[name]
    assert cls.description.strip()
    names = [f.name for f in cls.observation_fields]
    assert len(names) == len(set(names))
    assert not {"done", "reward", "metadata"} & set(names)


@pytest.mark.parametrize("name", GAMES)
def test_text_profile(name: str) -> None:
    """Kiln's text-profile check: one integer/string action field, non-blank input_text."""
    cls = environment_class(name)
    assert len(cls.action_fields) == 1
    field = cls.action_fields[0]
    assert field.type in ("integer", "string")
    assert field.required
    assert kit.INPUT_TEXT.schema["type"] == "string"
    assert kit.INPUT_TEXT in cls.observation_fields
    i = GAMES.index(name)
    env = cls()
    out = env.reset({"seed": 10000 + i, "difficulty": 2, "episode_id": f"kiln-text-profile-{i}"})
    text = out.observation["input_text"]
    assert isinstance(text, str)
    assert text.strip()
    assert f'Reply with JSON {{"{field.name}": ' in text
    assert out.reward is None
    assert out.done is False
    assert env.state()["episode_id"] == f"kiln-text-profile-{i}"
    assert env.state()["step_count"] == 0


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_observations_are_json_and_match_schema(name: str, difficulty: int) -> None:
    cls = environment_class(name)
    validator = STRICT(observation_schema(cls))
    log = transcript(name, seed=7 * difficulty, difficulty=difficulty, steps=60)
    kinds = {entry[0] for entry in log}
    assert "step" in kinds
    for entry in log:
        if entry[0] == "error":
            continue
        observation, reward, done = entry[2], entry[3], entry[4]
        validator.validate(observation)
        text = json.dumps(observation, allow_nan=False)
        assert json.loads(text) == observation  # no tuples, no non-str keys
        assert isinstance(done, bool)
        if entry[0] == "reset":
            assert reward is None
            assert done is False
        else:
            assert type(reward) is REWARD_TYPES[name], (reward, entry[1])
        json.dumps(entry[5], allow_nan=False)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("difficulty", [1, 3, 5])
def test_same_inputs_same_transcript(name: str, difficulty: int) -> None:
    first = transcript(name, seed=1234, difficulty=difficulty)
    second = transcript(name, seed=1234, difficulty=difficulty)
    assert digest(first) == digest(second)
    assert digest(first) != digest(transcript(name, seed=4321, difficulty=difficulty))


@pytest.mark.parametrize("name", GAMES)
def test_difficulty_changes_the_game(name: str) -> None:
    """Same seed and actions, easiest vs hardest level: what the player sees must differ.

    States are left out (they name the difficulty); each game's own test says what changes.
    """

    def seen(difficulty: int) -> str:
        log = transcript(name, 5, difficulty, steps=30)
        return digest([entry[:5] for entry in log if entry[0] != "error"])

    assert seen(1) != seen(5)


@pytest.mark.parametrize("name", GAMES)
def test_bad_actions_raise_and_change_nothing(name: str) -> None:
    cls = environment_class(name)
    field = cls.action_fields[0]
    env = cls()
    with pytest.raises(ExecutionError, match="reset"):
        env.step({field.name: 0 if field.type == "integer" else "up"})
    before = env.reset({"seed": 3}).observation
    wrong_type: Any = "zero" if field.type == "integer" else 0
    bad: list[Any] = [wrong_type, None, True]
    if field.type == "integer":
        bad += [99, -1, 2**70]
    elif name != "wordle":  # wordle answers unknown strings with valid=false instead
        bad += ["nonsense", ""]
    for value in bad:
        with pytest.raises(ExecutionError):
            env.step({field.name: value})
    with pytest.raises(ExecutionError):
        env.step({})
    assert env.step_count == 0
    assert env.reset({"seed": 3}).observation == before


@pytest.mark.parametrize("name", GAMES)
def test_seed_extremes_and_named_difficulty(name: str) -> None:
    env = environment_class(name)()
    for payload in ({"seed": 2**64 - 1}, {"seed": 0, "difficulty": "hard"}, {}):
        out = env.reset(payload)
        assert out.observation["input_text"].strip()
        assert not out.done
    assert env.reset({"difficulty": "easy"}).observation == env.reset({"difficulty": 1}).observation


@pytest.mark.parametrize("name", GAMES)
def test_episodes_are_bounded(name: str) -> None:
    """A valid-only random policy finishes every episode within the global step cap."""
    cls = environment_class(name)
    for seed in range(3):
        env = cls()
        out = env.reset({"seed": seed, "difficulty": 5})
        rng = SplitMix64(seed)
        steps = 0
        while not out.done:
            action = random_action(name, out.observation, rng)
            try:
                out = env.step(action)
            except ExecutionError:
                continue
            steps += 1
            assert steps <= kit.MAX_EPISODE_STEPS
        frozen = env.step(action)
        assert frozen.reward is None
        assert frozen.done
        assert frozen.observation == out.observation


_CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("games_child", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({n: module.digest(module.transcript(n, 99, 3)) for n in sys.argv[2:]}))
"""


def test_transcripts_match_across_processes() -> None:
    names = ["bandit", "connect4", "maze", "wordle", "g2048", "kuhn"]
    expected = {n: digest(transcript(n, 99, 3)) for n in names}
    root = Path(__file__).resolve().parents[2]
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, __file__, *names],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=root,
            timeout=60,
        )
        assert json.loads(result.stdout) == expected
