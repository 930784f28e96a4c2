"""Session-protocol checks beyond one exchange: ordering, episodes, state and episode ids."""

from __future__ import annotations

from typing import Any

from pytest_kiln.cases.context import CaseContext, guard
from pytest_kiln.cases.frames import error_code, recv_object
from pytest_kiln.cases.model import ANY_STATUS, CheckFailed, NotApplicable

#: The episode id ``ws.episode-id-echo`` asks the server to store.
CONFORMANCE_EPISODE_ID = "kiln-conformance-episode"
_RECOVERABLE = frozenset({"INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR"})


async def check_pipelining(ctx: CaseContext) -> str | None:
    """Three requests sent back to back are answered in order, one frame each."""
    async with ctx.raw() as ws:
        for text in ('{"type":"reset"}', '{"type":"state"}', '{"type":"state"}'):
            await ws.send(text)
        kinds = [str((await recv_object(ws, f"reply {n}")).get("type"))[:20] for n in (1, 2, 3)]
    if kinds != ["observation", "state", "state"]:
        raise CheckFailed(f"back-to-back reset, state, state were answered {kinds}")
    return None


async def check_reset_again(ctx: CaseContext) -> str | None:
    """After a step, another reset on the same socket starts a new episode."""
    async with ctx.session() as (session, first):
        await ctx.step_valid(session, first)
        again = await guard(session.reset(), "the second reset")
    if again.done:
        raise CheckFailed("a reset after a step answered done=true")
    return None


def _state_shape(state: Any) -> None:
    if not isinstance(state, dict):
        raise CheckFailed("the state is not a JSON object")
    episode = state.get("episode_id", ...)
    if episode is ... or not (episode is None or isinstance(episode, str)):
        raise CheckFailed("the state lacks episode_id (a string or null)")
    count = state.get("step_count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise CheckFailed("the state lacks a non-negative integer step_count")


async def check_state_shape(ctx: CaseContext) -> str | None:
    async with ctx.session() as (session, _):
        state = await guard(session.state(), "state")
    _state_shape(state)
    return f"step_count {state['step_count']}"


async def check_schema_state(ctx: CaseContext) -> str | None:
    client = await ctx.client()
    status, document = await client.request_json("GET", "/schema", allow=ANY_STATUS)
    if status != 200 or not isinstance(document, dict):
        raise CheckFailed(f"GET /schema answered HTTP {status}")
    state = document.get("state")
    properties = state.get("properties") if isinstance(state, dict) else None
    if not isinstance(properties, dict):
        raise CheckFailed("/schema.state has no properties")
    missing = [name for name in ("episode_id", "step_count") if name not in properties]
    if missing:
        raise CheckFailed(f"/schema.state lacks {missing}")
    return None


async def check_step_before_reset(ctx: CaseContext) -> str | None:
    """A step before any reset is answered (an observation or a recoverable error)."""
    from kiln_verify.core.jsonenc import dumps_compact

    action = await ctx.valid_action(None)
    text = '{"type":"step","data":' + dumps_compact(action).decode("utf-8") + "}"
    async with ctx.raw() as ws:
        await ws.send(text)
        reply = await recv_object(ws, "the reply to a step before reset")
        code = error_code(reply)
        if reply.get("type") != "observation" and code not in _RECOVERABLE:
            raise CheckFailed(f"a step before reset was answered {code or reply.get('type')!r}")
        await ws.send('{"type":"state"}')
        after = await recv_object(ws, "state after a step before reset")
        if after.get("type") != "state":
            raise CheckFailed("after a step before reset the session did not answer state")
    return "answered " + (code or "observation")


async def check_episode_id_echo(ctx: CaseContext) -> str | None:
    """A reset that names an episode id is reflected in ``State.episode_id``."""
    async with ctx.session({"episode_id": CONFORMANCE_EPISODE_ID}) as (session, _):
        state = await guard(session.state(), "state")
    if not isinstance(state, dict) or "episode_id" not in state:
        raise NotApplicable("the state has no episode_id")
    if state["episode_id"] != CONFORMANCE_EPISODE_ID:
        raise CheckFailed("State.episode_id is not the episode_id the reset payload named")
    return None
