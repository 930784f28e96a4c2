"""The likely cause of a replay drift, as the hint of the ``replay_drift`` error.

"Re-collect" is the fix for none of the usual causes: a uuid episode id is not cured by
collecting again, and a new build or new task data is something to restore or to accept
knowingly. The hint is derived from where the first drift is and what the rest of the
replay showed:

- identity (rediscovery): the URL now serves another environment (name or environment
  list changed), the authentication method changed, or a different build is deployed
  (version, schemas, discovery documents); after the replay: it changed *during* it;
- reset: the recorded payload is now refused; the candidates of one group disagree with
  each other (reset draws unseeded randomness); or they agree but not with the record
  (different task data or build under the same identity);
- step: the reward's JSON type changed (a build), an action's acceptance changed
  (validation or rules), or the same actions after an identical reset give other results
  (dynamics changed, or step draws randomness the seed does not fix);
- state: a session-identity field under ``--strict-state``, a payload-set ``episode_id``
  the live server does not keep (raised as ``episode_id_ignored``, with the hint rollout
  gives for the same cause) or the bundle did not keep, a volatile field whose type or
  presence changed, or hidden state that differs although every observation matched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kiln_verify.errors import EpisodeIdIgnored
from kiln_verify.openenv.records.reports import EnvironmentRemap
from kiln_verify.openenv.replay.candidate import CandidateOutcome, Drift
from kiln_verify.openenv.replay.compare import observation_difference
from kiln_verify.openenv.volatile import VOLATILE_STATE_FIELDS, volatile_state_fields

__all__ = ["candidate_hint", "identity_hint", "ignored_hint"]

_ACCEPT = "; if the change is intended, re-collect the bundle against this deployment"
_BUILD_FIELDS = ("metadata", "openapi_version", "schema_sha256", "discovery_sha256", "schema")


def identity_hint(
    changed: Sequence[str],
    *,
    when: str,
    remap: EnvironmentRemap | None = None,
    metadata_name_changed: bool = False,
) -> str:
    """Why rediscovery found another identity, from the names of the changed fields."""
    during = (
        "the environment changed while it was being replayed (a redeploy under the replay?): "
        if when == "after replay"
        else ""
    )
    if metadata_name_changed or "environments" in changed:
        moved = ""
        if remap is not None and remap.source == "oracle":
            moved = (
                f" (--oracle {remap.oracle} serves another environment; give --oracle without "
                "a name to serve the matching one)"
            )
        elif remap is not None:
            moved = f" (check --environment-url: it points at {remap.base_url})"
        return (
            f"{during}the server at this URL hosts a different environment than the bundle "
            f"recorded{moved}; replay it against the environment it was collected from"
        )
    if "authentication" in changed:
        return (
            f"{during}the server's authentication method changed (bearer token vs none): give "
            "--credential-env NAME for a server that now requires a token, or serve it as it "
            "was collected"
        )
    if "base_url" in changed or "websocket_url" in changed:
        return f"{during}the server answers under another address; use --environment-url OLD=NEW"
    build = [name for name in changed if name.split(".")[0] in _BUILD_FIELDS]
    return (
        f"{during}a different build of the environment is deployed ({', '.join(build or changed)}"
        " changed); restore the build the bundle was collected from" + _ACCEPT
    )


def _group_disagrees(outcomes: Sequence[CandidateOutcome]) -> bool:
    """Whether the live reset observations of one group's candidates differ among
    themselves (they all used the same recorded payload)."""
    resets = [outcome.live_reset for outcome in outcomes if outcome.live_reset is not None]
    return any(observation_difference(resets[0], other) is not None for other in resets[1:])


def _state_hint(
    drift: Drift, outcome: CandidateOutcome, reset_payload: Mapping[str, Any], strict: bool
) -> str:
    field = drift.difference.path.removeprefix("final_state.")
    if field in VOLATILE_STATE_FIELDS:
        if strict and field in volatile_state_fields(reset_payload):
            return (
                f"final_state.{field} is session identity (most OpenEnv servers give every "
                "reset a fresh uuid4 unless the reset payload names one); without "
                "--strict-state it is compared by presence and JSON type only"
            )
        if not strict and field in volatile_state_fields(reset_payload):
            return (
                f"the session-identity field final_state.{field} changed presence or JSON "
                f"type ({drift.difference.expected_type} -> {drift.difference.actual_type}): "
                "the server's episode-id handling changed (a different build)" + _ACCEPT
            )
        if outcome.ignored == field:
            return ignored_hint(field)
        return (
            f"the reset payload set {field}, so it is compared exactly, and the live server "
            f"keeps it but the bundle recorded another {field}: it was collected from a server "
            "that did not keep it; re-collect the bundle against this deployment"
        )
    if drift.difference.actual == repr('"not replayed"'):
        return "the live session ended before its state could be read; see the earlier drift"
    if outcome.observations_matched:
        return (
            "the hidden state differs although every observation matched: state the seed does "
            "not determine (unseeded randomness in reset or step) or a different build under "
            "the same identity" + _ACCEPT
        )
    return "the state differs after observations that had already drifted; see those first"


def ignored_hint(field: str) -> str:
    """The fix for a live server that does not keep the ``field`` a reset payload named
    (``episode_id_ignored``): the same cause and fix as rollout's refusal, said for replay."""
    return (
        f"the live server does not keep the {field} a reset names (OpenEnv's reset(seed, "
        f"episode_id) should store it in State.{field}; conformance case "
        f"{EpisodeIdIgnored.conformance_case}): fix the environment, or re-collect with {field} "
        "left out of the reset options (--reset-options), so that each session's own id is "
        "session identity, compared by presence and JSON type only"
    )


def candidate_hint(
    drift: Drift,
    *,
    outcome: CandidateOutcome,
    group_outcomes: Sequence[CandidateOutcome],
    reset_payload: Mapping[str, Any],
    strict_state: bool,
) -> str:
    """The likely cause of a candidate's first drift (``drift`` is ``outcome.first``)."""
    difference = drift.difference
    if drift.stage == "reset":
        if outcome.live_reset is None:
            return (
                "the server now refuses the recorded reset payload: its reset options or "
                "validation changed (a different build)" + _ACCEPT
            )
        if _group_disagrees(group_outcomes):
            return (
                "reset(seed) is not reproducible: candidates of one group got different "
                "observations for the same reset payload, so reset draws randomness the seed "
                "does not determine; derive every random choice from the seed"
            )
        return (
            "reset(seed) consistently gives a different observation than recorded: the task "
            "data or the environment build changed under the same identity" + _ACCEPT
        )
    if drift.stage == "step":
        if difference.actual == repr('"not replayed"'):
            return "the live session ended early; see the earlier drift of this candidate"
        if difference.path == "kind":
            return (
                "an action the environment answered one way when recorded (observation vs "
                "protocol error) is now answered the other way: its action validation or rules "
                "changed (a different build)" + _ACCEPT
            )
        if difference.path.endswith(".reward") and difference.expected_type != (
            difference.actual_type
        ):
            return (
                f"the reward's JSON type changed ({difference.expected_type} -> "
                f"{difference.actual_type}): rewards are compared with their type, so this is "
                "a different build" + _ACCEPT
            )
        if outcome.reset_drifted:
            return "the steps drifted after the reset had already drifted; see the reset first"
        return (
            "the same actions after an identical reset now give different results: the "
            "environment's rules or data changed under the same identity (a different "
            "build), or step draws randomness the seed does not determine" + _ACCEPT
        )
    return _state_hint(drift, outcome, reset_payload, strict_state)
