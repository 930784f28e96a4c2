"""Contract §14.2: what every oracle server must answer, checked over the OpenEnv protocol."""

from __future__ import annotations

from typing import Any

import pytest

from kiln_verify.errors import RecoverableProtocolError, TerminalProtocolError
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.protocol.tasks import task_catalog
from kiln_verify.openenv.protocol.wire import ErrorCode
from tests.gate.support import action_fields, requires_gate, run, tagged

pytestmark = requires_gate

ARCADE_SERVERS = 22
EXACT_TEXT_SERVERS = 8
WRONG_ANSWER = "kiln-interop-certainly-wrong"


# -- 1. counter ------------------------------------------------------------------------------


def test_counter_discovery_task_api_and_episode(counter_url: str) -> None:
    async def scenario() -> None:
        async with OpenEnvClient(counter_url) as client:
            inspection = await client.inspect()
            identity = inspection.identity
            assert identity.client_profile == "openenv-http/1.x"
            assert identity.metadata.name == "CounterEnvironment"
            assert identity.environments == ["counter_env"]
            action = inspection.environment_schema["action"]
            assert action["properties"]["amount"]["type"] == "integer"

            catalog = await task_catalog(client, start=0, limit=50)
            assert catalog.environment_name == "counter_env"
            assert catalog.task_api == "unsupported"

            async with await client.open_session() as session:
                first = await session.reset({"seed": 17, "episode_id": "kiln-interop"})
                assert first.observation["total"] == 0
                assert tagged(first.reward) == ("null", None)
                assert first.done is False
                second = await session.step({"amount": 2, "note": "first"})
                assert second.observation["total"] == 2
                assert tagged(second.reward) == ("float", 2.0)
                assert second.done is False
                third = await session.step({"amount": 2, "note": "second"})
                assert third.observation["total"] == 4
                assert tagged(third.reward) == ("float", 4.0)
                assert third.done is True
                state = await session.state()
                assert state == {"episode_id": "kiln-interop", "step_count": 2, "total": 4}

    run(scenario())


# -- 2. text profile over every arcade server --------------------------------------------------


def test_text_profile_over_every_arcade_server(arcade_urls: list[str]) -> None:
    assert len(arcade_urls) == ARCADE_SERVERS

    async def one(index: int, url: str) -> None:
        async with OpenEnvClient(url) as client:
            inspection = await client.inspect()
            schema = inspection.environment_schema
            assert schema["observation"]["properties"]["input_text"]["type"] == "string", url
            fields = action_fields(schema)
            assert len(fields) == 1, (url, sorted(fields))
            (spec,) = fields.values()
            assert spec.get("type") in ("integer", "string"), (url, spec)
            async with await client.open_session() as session:
                observation = await session.reset(
                    {
                        "seed": 10000 + index,
                        "difficulty": 2,
                        "episode_id": f"kiln-text-profile-{index}",
                    }
                )
                text = observation.observation.get("input_text")
                assert isinstance(text, str), url
                assert text.strip(), url
                assert observation.done is False, url

    async def scenario() -> None:
        for index, url in enumerate(arcade_urls):
            await one(index, url)

    run(scenario())


# -- 3. exact-verifier math ------------------------------------------------------------------


def test_exact_text_math_servers(exact_text_urls: list[str]) -> None:
    assert len(exact_text_urls) == EXACT_TEXT_SERVERS

    async def one(index: int, url: str) -> None:
        reset = {"seed": 20000 + index, "difficulty": 3}
        async with OpenEnvClient(url) as client:
            inspection = await client.inspect()
            action = inspection.environment_schema["action"]
            assert action["properties"]["answer"]["type"] == "string", url
            async with await client.open_session() as session:
                start = await session.reset(reset)
                prompt = start.observation.get("input_text")
                assert isinstance(prompt, str), url
                assert prompt.strip(), url
                assert tagged(start.reward) == ("null", None)
                assert start.done is False
                with pytest.raises(RecoverableProtocolError) as caught:
                    await session.step({"answer": 7})
                assert caught.value.error.code is ErrorCode.VALIDATION_ERROR
                assert caught.value.error.recoverable
                wrong = await session.step({"answer": WRONG_ANSWER})
                assert tagged(wrong.reward) == ("integer", 0), url
                assert wrong.done is True
                answer = wrong.observation.get("answer")
                assert isinstance(answer, str), url
                assert answer, url
                after = await session.step({"answer": WRONG_ANSWER})
                assert tagged(after.reward) == ("null", None)
                assert after.done is True
                assert after.observation == wrong.observation
            async with await client.open_session() as session:
                again = await session.reset(reset)
                assert again.observation.get("input_text") == prompt
                assert not again.observation.get("answer")
                right = await session.step({"answer": answer})
                assert tagged(right.reward) == ("integer", 1), url
                assert right.done is True

    async def scenario() -> None:
        for index, url in enumerate(exact_text_urls):
            await one(index, url)

    run(scenario())


# -- 4. representative arcade servers ----------------------------------------------------------


def _field_type(schema: dict[str, Any], name: str) -> Any:
    return schema["action"]["properties"][name]["type"]


def test_bandit(bandit_url: str) -> None:
    async def scenario() -> None:
        async with OpenEnvClient(bandit_url) as client:
            inspection = await client.inspect()
            assert _field_type(inspection.environment_schema, "arm") == "integer"
            async with await client.open_session() as session:
                start = await session.reset({"seed": 41})
                assert start.observation["pulls"] == 0
                with pytest.raises(RecoverableProtocolError) as caught:
                    await session.step({"arm": 99})
                assert caught.value.error.code is ErrorCode.EXECUTION_ERROR
                assert session.usable  # the same socket carries on
                pulled = await session.step({"arm": 0})
                assert pulled.observation["pulls"] == 1
                assert pulled.observation["last_arm"] == 0
                assert tagged(pulled.reward) in (("integer", 0), ("integer", 1))

    run(scenario())


def test_connect4(connect4_url: str) -> None:
    async def scenario() -> None:
        async with OpenEnvClient(connect4_url) as client:
            inspection = await client.inspect()
            assert _field_type(inspection.environment_schema, "col") == "integer"
            async with await client.open_session() as session:
                start = await session.reset({"seed": 42})
                assert start.observation["legal_actions"] == [0, 1, 2, 3, 4, 5, 6]
                moved = await session.step({"col": 3})
                assert isinstance(moved.observation["board"], str)
                assert "X" in moved.observation["board"]
                assert isinstance(moved.observation["legal_actions"], list)
                state = await session.state()
                assert state["step_count"] == 1

    run(scenario())


def test_maze(maze_url: str) -> None:
    async def scenario() -> None:
        async with OpenEnvClient(maze_url) as client:
            inspection = await client.inspect()
            assert _field_type(inspection.environment_schema, "move") == "integer"
            async with await client.open_session() as session:
                start = await session.reset({"seed": 43})
                grid = start.observation["grid"]
                assert isinstance(grid, str)
                assert "A" in grid
                assert "G" in grid
                moved = await session.step({"move": 0})
                assert moved.observation["goal_x"] == 13
                state = await session.state()
                assert state["step_count"] == 1

    run(scenario())


def test_wordle(wordle_url: str) -> None:
    async def scenario() -> None:
        async with OpenEnvClient(wordle_url) as client:
            inspection = await client.inspect()
            assert _field_type(inspection.environment_schema, "guess") == "string"
            async with await client.open_session() as session:
                start = await session.reset({"seed": 44})
                assert start.observation["guesses"] == 0
                guessed = await session.step({"guess": "crane"})
                assert guessed.observation["valid"] is True
                assert guessed.observation["guesses"] == 1
                state = await session.state()
                assert state["step_count"] == 1

    run(scenario())


# -- 5. capacity on the one-session bandit -------------------------------------------------------


def test_capacity_on_the_one_session_bandit(bandit_url: str) -> None:
    async def scenario() -> None:
        async with OpenEnvClient(bandit_url) as client:
            first = await client.open_session()
            try:
                await first.reset({"seed": 1})
                second = await client.open_session()  # the upgrade itself succeeds
                try:
                    with pytest.raises(TerminalProtocolError) as caught:
                        await second.reset({"seed": 2})
                finally:
                    await second.close()
                error = caught.value.error
                assert error.code is ErrorCode.CAPACITY_REACHED
                assert error.is_terminal
                assert (error.active_sessions, error.max_sessions) == (1, 1)
            finally:
                await first.close()
            # The slot is released once A has closed (the server may take a moment).
            acquired = await client.open_session_with_capacity(5, reset_data={"seed": 3})
            try:
                assert acquired.observation is not None
                assert acquired.observation.done is False
            finally:
                await acquired.session.close()

    run(scenario())
