"""The collection options and the validated controls of one collection (contract §5.1).

:class:`CollectionOptions` is the one typed declaration of the tunable options: each field
carries its default, help text and metavar (:func:`option`), and the ``rollout`` and
``evaluate`` commands build one flag per field from it
(``kiln_verify.cli.collection_options``); a server run request fills the same fields
(``kiln_verify.control.admission``). :class:`CollectionControls` adds what a collection
needs besides (environments, reset templates, credential slots, outputs) and checks every
rule in ``__post_init__``, so no instance, even one made by ``dataclasses.replace``, holds
a value the collector would refuse: counts against the collector limits of
:mod:`kiln_verify.limits`, ``groups >= environments`` (every endpoint must appear in the
plan so the reset plan is receipt-verifiable), the seed range, finite rewards and
temperature, the thinking budget, distinct output paths, credential slots and reset
templates. All of it runs before any network contact.

A violation is a :class:`~kiln_verify.errors.UsageError` (exit status 2) whose rule names
the contract fields in backticks (`` `groups` ``) and lists them in ``fields``; the
command line shows them as the flags a user types (``--groups``), the control plane as
the request's field names.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import GrpoOutputUnsupported, KilnError, LimitExceeded, UsageError
from kiln_verify.limits import (
    MAX_ACTION_TOKENS,
    MAX_CAPACITY_WAIT_S,
    MAX_CONCURRENCY,
    MAX_ENVIRONMENTS,
    MAX_GROUP_SIZE,
    MAX_GROUPS,
    MAX_RECOVERABLE_ERRORS,
    MAX_RESET_OPTIONS_FILE_BYTES,
    MAX_ROLLOUTS,
    MAX_STEPS,
)
from kiln_verify.openenv.protocol.access import (
    DEFAULT_CAPACITY_WAIT_S,
    DEFAULT_CONCURRENCY,
    EnvironmentAccess,
)
from kiln_verify.records import I64_MAX

__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_REPLAY",
    "DEFAULT_SUMMARY",
    "OPTION_NAMES",
    "CollectionControls",
    "CollectionOptions",
    "load_reset_options",
    "option",
]

DEFAULT_DATASET = "openenv.rollouts.jsonl"
DEFAULT_REPLAY = "openenv.replay.json"
DEFAULT_SUMMARY = "openenv.rollout-summary.json"


def option(default: Any, help: str, metavar: str | None = None) -> Any:
    """A collection option: its default, and its help text and metavar as a flag."""
    return field(default=default, metadata={"help": help, "metavar": metavar})


def _usage(rule: str, *names: str, hint: str | None = None) -> UsageError:
    """A usage error whose rule (and hint) name the contract fields ``names``."""
    return UsageError(rule, hint=hint, fields=names)


def _int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _usage(f"`{name}` must be an integer in {low}..{high}", name)
    return value


def _float(name: str, value: object, *, non_negative: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _usage(f"`{name}` must be a number", name)
    number = float(value)
    if not math.isfinite(number) or (non_negative and number < 0):
        what = "a finite number >= 0" if non_negative else "a finite number"
        raise _usage(f"`{name}` must be {what}", name)
    return number


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionOptions:
    """The tunable options of a collection, shared by ``rollout``, ``evaluate`` and server
    runs. Checked together with the rest by :class:`CollectionControls`."""

    groups: int = option(8, "Groups (one seed each).", "N")
    group_size: int = option(4, "Candidates per group.", "N")
    seed_start: int = option(0, "Seed of group 0; +1 per group.", "SEED")
    max_steps: int = option(8, "Model actions per episode at most.", "N")
    concurrency: int = option(DEFAULT_CONCURRENCY, "Candidate sessions at once.", "N")
    max_action_tokens: int = option(256, "Tokens per model action.", "N")
    thinking_budget_tokens: int | None = option(
        None, "Thinking token budget (needs --thinking).", "N"
    )
    temperature: float = option(1.0, "Sampling temperature.", "T")
    thinking: bool = option(True, "Thinking mode: reasoning kept in the trajectory.")
    protocol_error_reward: float = option(
        -1.0, "Penalty per protocol error or invalid action.", "REWARD"
    )
    max_recoverable_errors: int = option(
        3, "Recoverable errors an episode may continue after.", "N"
    )
    capacity_wait_seconds: int = option(
        DEFAULT_CAPACITY_WAIT_S, "How long to wait for a free session slot.", "SECONDS"
    )
    state_check: bool = option(
        True,
        "Read each candidate's state after reset and fail a group whose hidden states differ "
        "(off: for servers whose state is expensive).",
    )

    def __post_init__(self) -> None:
        # A JSON or Python integer for a float option is that float (1 -> 1.0).
        for name in ("temperature", "protocol_error_reward"):
            value = getattr(self, name)
            if type(value) is int:
                object.__setattr__(self, name, float(value))

    @property
    def in_flight(self) -> int:
        """Candidates run at once within a group: ``min(concurrency, group_size)``."""
        return min(self.concurrency, self.group_size)

    @property
    def rollout_count(self) -> int:
        return self.groups * self.group_size

    def check(self, environments: int) -> None:
        """§5.1: every bound and cross-field rule of the options; :class:`UsageError`."""
        groups = _int("groups", self.groups, 1, MAX_GROUPS)
        size = _int("group_size", self.group_size, 1, MAX_GROUP_SIZE)
        if groups * size > MAX_ROLLOUTS:
            raise _usage(
                f"`groups` x `group_size` = {groups * size} exceeds MAX_ROLLOUTS = {MAX_ROLLOUTS}",
                "groups",
                "group_size",
            )
        if groups < environments:
            raise _usage(
                f"`groups` ({groups}) must be at least the number of environments "
                f"({environments}) so that every endpoint is exercised",
                "groups",
                "environments",
                hint="raise `groups` or drop one of the `environments`",
            )
        seed = _int("seed_start", self.seed_start, 0, I64_MAX)
        if seed + groups - 1 > I64_MAX:
            raise _usage(
                "`seed_start` + `groups` - 1 exceeds the largest i64 seed", "seed_start", "groups"
            )
        _int("max_steps", self.max_steps, 1, MAX_STEPS)
        _int("concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        tokens = _int("max_action_tokens", self.max_action_tokens, 1, MAX_ACTION_TOKENS)
        _int("max_recoverable_errors", self.max_recoverable_errors, 0, MAX_RECOVERABLE_ERRORS)
        _int("capacity_wait_seconds", self.capacity_wait_seconds, 1, int(MAX_CAPACITY_WAIT_S))
        _float("protocol_error_reward", self.protocol_error_reward)
        _float("temperature", self.temperature, non_negative=True)
        for name in ("thinking", "state_check"):
            if not isinstance(getattr(self, name), bool):
                raise _usage(f"`{name}` must be true or false", name)
        if self.thinking_budget_tokens is not None:
            _int("thinking_budget_tokens", self.thinking_budget_tokens, 0, tokens - 1)
            if not self.thinking:
                raise _usage(
                    "`thinking_budget_tokens` requires `thinking`",
                    "thinking_budget_tokens",
                    "thinking",
                )


#: The option names, in declaration order: one flag each on both collection commands.
OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(CollectionOptions))

_OUTPUTS = ("output", "replay_output", "summary_output")


@dataclass(frozen=True, slots=True)
class CollectionControls:
    """Everything that determines a collection except the policy; valid by construction
    (checked in ``__post_init__``). :meth:`create` aligns the per-environment sequences.

    ``reset_templates`` is one object per environment (already aligned: a shared
    ``--reset-options`` object is repeated); they may still contain ``seed`` (the plan
    removes it). ``credential_envs`` is empty or one slot per environment (``None`` =
    public).
    """

    environments: tuple[str, ...]
    reset_templates: tuple[Mapping[str, Any], ...]
    credential_envs: tuple[str | None, ...] = ()
    options: CollectionOptions = CollectionOptions()
    output: str = DEFAULT_DATASET
    replay_output: str = DEFAULT_REPLAY
    summary_output: str = DEFAULT_SUMMARY
    force: bool = False
    grpo_output: str | None = None

    @classmethod
    def create(
        cls,
        environments: Sequence[str],
        *,
        reset_templates: Sequence[Mapping[str, Any]] | None = None,
        credential_envs: Sequence[str | None] = (),
        options: CollectionOptions | None = None,
        output: str = DEFAULT_DATASET,
        replay_output: str = DEFAULT_REPLAY,
        summary_output: str = DEFAULT_SUMMARY,
        force: bool = False,
        grpo_output: str | None = None,
    ) -> CollectionControls:
        """Validate and build; reset templates: ``None`` (all ``{}``), one shared, or one each."""
        envs = tuple(environments)
        if not 1 <= len(envs) <= MAX_ENVIRONMENTS:
            raise _usage(
                f"give 1..{MAX_ENVIRONMENTS} `environments` (got {len(envs)})",
                "environments",
                hint="name each OpenEnv server once in `environments`",
            )
        templates = tuple(reset_templates) if reset_templates is not None else ({},)
        if len(templates) == 1 and len(envs) > 1:
            templates = templates * len(envs)
        if len(templates) != len(envs):
            raise _usage(
                f"{len(templates)} reset templates for {len(envs)} environments",
                "reset_templates",
                "environments",
                hint="give one of the `reset_templates` per entry of `environments` (or one)",
            )
        for index, template in enumerate(templates):
            if not isinstance(template, Mapping):
                raise UsageError(f"reset options for environment {index} must be a JSON object")
        slots = tuple(credential_envs)
        if slots and len(slots) != len(envs):
            raise _usage(
                f"{len(slots)} `credential_envs` slots for {len(envs)} environments",
                "credential_envs",
                "environments",
                hint="give one `credential_envs` slot per entry of `environments`",
            )
        return cls(
            environments=envs,
            reset_templates=tuple(dict(t) for t in templates),
            credential_envs=slots,
            options=CollectionOptions() if options is None else options,
            output=output,
            replay_output=replay_output,
            summary_output=summary_output,
            force=force,
            grpo_output=grpo_output,
        )

    def access(self, environ: Mapping[str, str] | None = None) -> EnvironmentAccess:
        """How this collection reaches its environments: its credential slots, read from
        ``environ`` (default: the process environment), its capacity wait and concurrency
        (already checked by the collector's rules, which are within replay's)."""
        return EnvironmentAccess(
            credential_envs=self.credential_envs,
            environ=environ,
            capacity_wait_seconds=self.options.capacity_wait_seconds,
            concurrency=self.options.concurrency,
        )

    def __post_init__(self) -> None:
        """§5.1: every bound and cross-field rule; raises :class:`UsageError`."""
        self.options.check(len(self.environments))
        paths = [self.output, self.replay_output, self.summary_output]
        if any(not p for p in paths):
            raise _usage(
                "`output`, `replay_output` and `summary_output` must not be empty", *_OUTPUTS
            )
        resolved = {os.path.realpath(os.path.abspath(p)) for p in paths}
        if len(resolved) != 3:
            raise _usage(
                "`output`, `replay_output` and `summary_output` must name three distinct files",
                *_OUTPUTS,
            )
        if self.grpo_output is not None:
            self._check_grpo(resolved)

    def _check_grpo(self, bundle_paths: set[str]) -> None:
        """``grpo_output``: real groups (two or more candidates) and an exact f32 temperature.

        Multi-step episodes and a thinking budget are recorded as one token stream per
        episode (``collect.grpo_corpus``); whether the policy can record them is checked
        against the policy (``collect.grpo_tokenizer``) and by the policy itself."""
        # the HF record layer costs start-up time every rollout would pay; only this flag needs it
        from kiln_verify.hf.manifest.grpo import F32
        from kiln_verify.hf.manifest.grpo import MIN_GROUP_COMPLETIONS as MIN_GRPO_GROUP_SIZE

        options = self.options
        if not self.grpo_output:
            raise _usage("`grpo_output` must not be empty", "grpo_output")
        if os.path.realpath(os.path.abspath(self.grpo_output)) in bundle_paths:
            raise _usage("`grpo_output` must differ from the three bundle files", "grpo_output")
        if options.group_size < MIN_GRPO_GROUP_SIZE:
            raise GrpoOutputUnsupported(
                f"`grpo_output` needs `group_size` >= {MIN_GRPO_GROUP_SIZE} (got "
                f"{options.group_size}): a GRPO row compares at least two completions of one "
                "prompt",
                fields=("grpo_output", "group_size"),
            )
        try:
            TypeAdapter(F32).validate_python(options.temperature)
        except ValueError:
            raise GrpoOutputUnsupported(
                f"`grpo_output` needs a `temperature` that is 0 or an exact f32 in [1e-5, 1e12) "
                f"(got {options.temperature!r}); e.g. 0.7 or 1.0",
                hint="use a `temperature` with few significant digits",
                fields=("grpo_output", "temperature"),
            ) from None


def load_reset_options(path: str) -> dict[str, Any]:
    """One reset-options file: ``-`` is ``{}``; else a regular file holding one JSON object.

    The size is refused from metadata before reading (``MAX_RESET_OPTIONS_FILE_BYTES``).
    """
    if path == "-":
        return {}
    try:
        info = os.stat(path)
    except OSError as exc:
        raise UsageError(
            f"cannot read reset options: {exc.strerror}", path=path, hint="check the path"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError("reset options must be a regular file", path=path)
    if info.st_size > MAX_RESET_OPTIONS_FILE_BYTES:
        raise LimitExceeded(
            "the reset options file",
            limit="MAX_RESET_OPTIONS_FILE_BYTES",
            bound=MAX_RESET_OPTIONS_FILE_BYTES,
            observed=info.st_size,
            path=path,
        )
    data = Path(path).read_bytes()
    try:
        return loads_object(data, max_bytes=MAX_RESET_OPTIONS_FILE_BYTES, source=path)
    except KilnError as exc:
        raise UsageError(
            f"reset options must be one strict JSON object ({exc.code}: {exc.rule})", path=path
        ) from None
