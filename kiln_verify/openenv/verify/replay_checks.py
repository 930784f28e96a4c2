"""The replay manifest on its own (kiln-openenv-contract §6.5, §7.3).

Shape rules (schema/profile constants, digest spelling, finite numbers, ``max_steps > 0``,
object actions and reset payloads, terminal codes never ``continued``) are already
enforced by :mod:`kiln_verify.openenv.records.replay`; this module checks what needs more
than one record: contiguous indices, the end of each episode, the termination against the
last exchange, the recoverable-error budget, ``final_state`` presence and the bit-exact
recomputation of every episode return in Kiln's summation order.
"""

from __future__ import annotations

from kiln_verify.errors import BundleReplayInconsistent, BundleReturnMismatch
from kiln_verify.openenv.records.replay import (
    ObservationResult,
    ProtocolErrorResult,
    ReplayCandidate,
    ReplayGroup,
    ReplayManifest,
)
from kiln_verify.records import bits_equal

__all__ = ["check_group", "check_replay", "recompute_return", "where"]


def where(group: int, candidate: int | None = None, step: int | None = None) -> str:
    """The location text of a bundle error: ``group G[ candidate C[ step S]]``."""
    text = f"group {group}"
    if candidate is not None:
        text += f" candidate {candidate}"
    if step is not None:
        text += f" step {step}"
    return text


def recompute_return(candidate: ReplayCandidate, penalty: float) -> float:
    """Σ reward training values + penalty per protocol error, + penalty if invalid (last).

    The same left-to-right f64 additions as Kiln's collector, starting from ``0.0``.
    """
    total = 0.0
    for exchange in candidate.exchanges:
        result = exchange.result
        if isinstance(result, ObservationResult):
            total += result.observation.reward.training_value
        else:
            total += penalty
    if candidate.termination == "invalid_model_action":
        total += penalty
    return total


def _check_candidate(
    candidate: ReplayCandidate,
    *,
    group: int,
    max_steps: int,
    penalty: float,
    max_recoverable: int,
    shown: str,
) -> None:
    index = candidate.candidate_index

    def fail(rule: str, step: int | None = None) -> BundleReplayInconsistent:
        return BundleReplayInconsistent(rule, path=shown, location=where(group, index, step))

    exchanges = candidate.exchanges
    if len(exchanges) > max_steps:
        raise fail(f"{len(exchanges)} exchanges exceed max_steps = {max_steps} (§6.5)")
    recoverable = 0
    for position, exchange in enumerate(exchanges):
        if exchange.step_index != position:
            raise fail(f"step_index {exchange.step_index} is not contiguous from 0", position)
        if position > 0 and exchanges[position - 1].result.ends_episode:
            raise fail("an exchange follows the result that ended the episode", position)
        result = exchange.result
        if isinstance(result, ProtocolErrorResult) and result.error.recoverable:
            if result.continued and recoverable >= max_recoverable:
                raise fail(
                    f"a continued recoverable error exceeds max_recoverable_errors = "
                    f"{max_recoverable}",
                    position,
                )
            if not result.continued and recoverable != max_recoverable:
                raise fail(
                    "a recoverable error ended the episode although the budget was not spent",
                    position,
                )
            recoverable += 1
    if recoverable != candidate.recoverable_protocol_errors:
        raise fail(
            f"recoverable_protocol_errors = {candidate.recoverable_protocol_errors}, but "
            f"{recoverable} recoverable error exchanges are recorded"
        )
    last = exchanges[-1].result if exchanges else None
    last_done = isinstance(last, ObservationResult) and last.observation.done
    last_stop = isinstance(last, ProtocolErrorResult) and not last.continued
    termination = candidate.termination
    if (termination == "done") != last_done:
        raise fail(f"termination {termination!r} disagrees with the last exchange's done flag")
    if (termination == "protocol_error") != last_stop:
        raise fail(
            f"termination {termination!r} disagrees with the last exchange "
            "(protocol_error ⇔ a final non-continued error)"
        )
    if termination == "max_steps" and len(exchanges) != max_steps:
        raise fail(f"termination 'max_steps' needs exactly {max_steps} exchanges")
    if termination == "invalid_model_action" and len(exchanges) >= max_steps:
        raise fail("an invalid model action needs a step left within max_steps")
    if candidate.has_final_state == candidate.ended_by_terminal_code:
        raise fail("final_state must be absent exactly when a terminal-code error ended it")
    expected = recompute_return(candidate, penalty)
    if not bits_equal(expected, candidate.episode_return):
        raise BundleReturnMismatch(
            f"recomputed episode return {expected!r} differs from the recorded "
            f"{candidate.episode_return!r} (§6.5)",
            path=shown,
            location=where(group, index),
        )


def check_group(
    group: ReplayGroup,
    position: int,
    *,
    environments: int,
    max_steps: int,
    penalty: float,
    max_recoverable: int,
    shown: str,
) -> int:
    """Check §6.5 for the group at ``position``; return its number of exchanges."""
    g = group.group_index
    if g != position:
        raise BundleReplayInconsistent(
            f"group_index {g} is not contiguous from 0", path=shown, location=where(position)
        )
    if group.environment_index >= environments:
        raise BundleReplayInconsistent(
            f"environment_index {group.environment_index} is out of range "
            f"({environments} environments)",
            path=shown,
            location=where(g),
        )
    if group.reset_observation.done:
        raise BundleReplayInconsistent(
            "the reset observation must not be done", path=shown, location=where(g)
        )
    exchanges = 0
    for slot, candidate in enumerate(group.candidates):
        if candidate.candidate_index != slot:
            raise BundleReplayInconsistent(
                f"candidate_index {candidate.candidate_index} is not contiguous from 0",
                path=shown,
                location=where(g, slot),
            )
        _check_candidate(
            candidate,
            group=g,
            max_steps=max_steps,
            penalty=penalty,
            max_recoverable=max_recoverable,
            shown=shown,
        )
        exchanges += len(candidate.exchanges)
    return exchanges


def check_replay(manifest: ReplayManifest, *, max_recoverable: int, shown: str) -> int:
    """Check §6.5 for every group and candidate; return the total number of exchanges."""
    return sum(
        check_group(
            group,
            position,
            environments=len(manifest.environments),
            max_steps=manifest.max_steps,
            penalty=manifest.protocol_error_reward,
            max_recoverable=max_recoverable,
            shown=shown,
        )
        for position, group in enumerate(manifest.groups)
    )
