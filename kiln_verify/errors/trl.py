"""Errors of online GRPO in TRL on OpenEnv environments (:mod:`kiln_verify.trl`).

Each is a refusal with one stable code: a configuration that cannot be recorded exactly is
refused before training starts (or when the batch that exposes it arrives), never recorded
approximately.
"""

from __future__ import annotations

from kiln_verify.errors.base import KilnError


class TrlError(KilnError, abstract=True):
    """TRL's trainer, the environment factory or the recorder cannot do what was asked."""


class TrlActionSchemaUnsupported(TrlError):
    """The environment's advertised action schema cannot be a Python tool signature."""

    code = "trl_action_schema_unsupported"
    exit_code = 2
    default_hint = (
        "an action tool needs a flat object schema of scalar, scalar-array or free-form object "
        "properties; use the rollout_func path (kiln_verify.trl.OpenEnvRolloutFunc) instead"
    )


class TrlResetFieldReserved(TrlError):
    """A dataset row tries to set a reset field the seed rule owns (``seed``, ``episode_id``)."""

    code = "trl_reset_field_reserved"
    exit_code = 2
    default_hint = "drop `seed` and `episode_id` from the row's `reset` object (docs/trl.md)"


class TrlRewardNotFinite(TrlError):
    """An episode's return (or the reward TRL combined from it) is not a finite number."""

    code = "trl_reward_not_finite"
    default_hint = "the environment's rewards must stay finite; fix the environment"


class TrlBatchOverCapacity(TrlError):
    """A batch needs more concurrent sessions than the server admits within the wait bound."""

    code = "trl_batch_over_capacity"
    default_hint = (
        "raise the server's max sessions to the per-device generation batch, lower the "
        "batch, or use the rollout_func path, which runs episodes one session at a time"
    )


class TrlBatchAmbiguous(TrlError):
    """TRL's batch cannot be mapped onto groups, candidates and one behaviour policy exactly."""

    code = "trl_batch_ambiguous"
    exit_code = 2
    default_hint = 'see docs/trl.md, "How a TRL batch maps onto groups"'


class TrlEpisodeFailed(TrlError):
    """An episode of the batch failed (environment gone, poisoned session, ...): the step
    fails and publishes nothing."""

    code = "trl_episode_failed"
    default_hint = "the environment failed mid-batch; fix it and resume from the last checkpoint"


class TrlRecordingFailed(TrlError):
    """What TRL generated cannot be recorded as an exact, verifiable bundle."""

    code = "trl_recording_failed"
    default_hint = "see docs/trl.md for what the recorder requires of the trainer's batch"
