"""Rollout collection flags shared by `openenv rollout` and `openenv evaluate` (contract §11).

The typer option declarations are ``Annotated`` aliases so both commands show the same names,
help texts and defaults; :func:`build_controls` is the one mapping from the parsed flags to
:class:`CollectionControls`; :class:`EmbeddedOracle` serves the embedded oracle in-process
when no ``--environment`` is given. Per-command flags (``--groups``, ``--group-size``, the
evaluation's ``--seed-start``, ``--oracle``'s help text, outputs, policies) stay with the
commands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from kiln_verify.errors import UsageError
from kiln_verify.openenv.collect import CollectionControls, load_reset_options

__all__ = [
    "CapacityWaitSeconds",
    "Concurrency",
    "CredentialEnv",
    "EmbeddedOracle",
    "Environment",
    "EnvironmentResetOptions",
    "Force",
    "MaxActionTokens",
    "MaxRecoverableErrors",
    "MaxSteps",
    "ProtocolErrorReward",
    "ResetOptions",
    "SeedStart",
    "Temperature",
    "Thinking",
    "ThinkingBudgetTokens",
    "build_controls",
    "parse_bool",
    "reset_templates",
]

#: Stands in for the embedded oracle's URL until it is started (after validation).
PLACEHOLDER_URL = "http://127.0.0.1:1"
#: The embedded oracle served when neither ``--environment`` nor ``--oracle`` is given.
DEFAULT_ORACLE = "bandit"

Environment = Annotated[
    list[str] | None,
    typer.Option("--environment", help="OpenEnv base URL (repeat; groups rotate round-robin)."),
]
CredentialEnv = Annotated[
    list[str] | None,
    typer.Option(
        "--credential-env", help="Bearer-token variable NAME per --environment; '-' = public."
    ),
]
ResetOptions = Annotated[
    str | None,
    typer.Option("--reset-options", help="JSON object FILE merged into every reset (seed is set)."),
]
EnvironmentResetOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--environment-reset-options", help="Per-environment reset FILE (repeat; '-' = {})."
    ),
]
SeedStart = Annotated[int, typer.Option("--seed-start", help="Seed of group 0; +1 per group.")]
MaxSteps = Annotated[int, typer.Option("--max-steps", help="Model actions per episode at most.")]
Concurrency = Annotated[int, typer.Option("--concurrency", help="Candidate sessions at once.")]
MaxActionTokens = Annotated[int, typer.Option("--max-action-tokens", help="Tokens per action.")]
ThinkingBudgetTokens = Annotated[
    int | None,
    typer.Option("--thinking-budget-tokens", help="Thinking token budget (needs --thinking true)."),
]
Temperature = Annotated[float, typer.Option("--temperature", help="Sampling temperature.")]
Thinking = Annotated[str, typer.Option("--thinking", help="true|false: thinking mode.")]
ProtocolErrorReward = Annotated[
    float,
    typer.Option("--protocol-error-reward", help="Penalty per protocol error or invalid action."),
]
MaxRecoverableErrors = Annotated[
    int,
    typer.Option(
        "--max-recoverable-errors", help="Recoverable errors an episode may continue after."
    ),
]
CapacityWaitSeconds = Annotated[
    int,
    typer.Option("--capacity-wait-seconds", help="How long to wait for a free session slot."),
]
Force = Annotated[bool, typer.Option("--force", help="Replace existing output files.")]


def parse_bool(flag: str, text: str) -> bool:
    """``true|1|yes|on`` / ``false|0|no|off`` (any case); anything else is a usage error."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"{flag} takes true or false, not {text[:32]!r}")


def reset_templates(shared: str | None, per_environment: list[str]) -> list[dict[str, Any]] | None:
    """Reset templates from ``--reset-options`` or ``--environment-reset-options`` (not both)."""
    if shared is not None and per_environment:
        raise UsageError(
            "--reset-options and --environment-reset-options are mutually exclusive",
            hint="give one shared object or one object per --environment",
        )
    if shared is not None:
        return [load_reset_options(shared)]
    if per_environment:
        return [load_reset_options(path) for path in per_environment]
    return None


def build_controls(
    *,
    environment: list[str] | None,
    credential_env: list[str] | None,
    reset_options: str | None,
    environment_reset_options: list[str] | None,
    thinking: str,
    **options: Any,
) -> CollectionControls:
    """Validated controls from the parsed flags; ``options`` are the plain pass-through ones.

    Without ``--environment`` the controls name a placeholder URL;
    :meth:`EmbeddedOracle.serve` swaps in the embedded oracle's once it runs.
    """
    if not environment and credential_env:
        raise UsageError("--credential-env needs --environment")
    return CollectionControls.create(
        environment or [PLACEHOLDER_URL],
        reset_templates=reset_templates(reset_options, environment_reset_options or []),
        credential_envs=[None if slot == "-" else slot for slot in credential_env or []],
        thinking=parse_bool("--thinking", thinking),
        **options,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class EmbeddedOracle:
    """The embedded-oracle default: ``name`` is ``None`` when ``--environment`` was given."""

    name: str | None

    @classmethod
    def from_flags(cls, environment: list[str] | None, oracle: str | None) -> EmbeddedOracle:
        """Check ``--oracle`` against ``--environment`` (usage error when both are given)."""
        if oracle is not None and environment:
            raise UsageError("--oracle only applies when no --environment is given")
        return cls(None if environment else oracle or DEFAULT_ORACLE)

    @contextmanager
    def serve(self, controls: CollectionControls) -> Iterator[CollectionControls]:
        """``controls`` as given, or aimed at the oracle served in-process until exit."""
        if self.name is None:
            yield controls
            return
        from oracle.runner import ServerConfig, start_server

        try:
            handle = start_server(ServerConfig(self.name))
        except (KeyError, ValueError) as exc:
            raise UsageError(f"cannot start the embedded oracle: {exc}") from None
        try:
            yield dataclasses.replace(controls, environments=(handle.base_url,))
        finally:
            handle.stop()
