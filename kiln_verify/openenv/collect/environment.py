"""One discovered environment as every episode against it needs it.

The inspection, the compiled action schema and what is derived from them once per
environment (the action-schema digest, the system prompt) rather than once per episode,
plus two bounded memories of per-output verdicts (:meth:`EnvironmentContext.parse_action`,
:meth:`EnvironmentContext.schema_violation`): scripted and sampled policies repeat a few
outputs, and parsing and schema validation were fixed costs of every step.

The episode state machine (:mod:`.machine`) sees only :class:`EpisodeEnvironment`, these
pure parts without the client; ``client`` is for the driver. The client is named for the
type checker only, so importing this module (and so the machine) loads no network library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kiln_verify.limits import MAX_ACTION_CHECK_CACHE_ENTRIES, MAX_ACTION_CHECK_CACHE_KEY_CHARS
from kiln_verify.openenv.protocol.action_schema import ActionSchema
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.prompt import ActionRules, parse_model_action, system_prompt
from kiln_verify.openenv.records.serialize import action_schema_sha256

if TYPE_CHECKING:
    from kiln_verify.openenv.protocol.client import OpenEnvClient

__all__ = ["EnvironmentContext", "EpisodeEnvironment"]


class EpisodeEnvironment(ActionRules, Protocol):
    """What one episode needs of its environment, without the client: the view the
    Sans-I/O machine is written against (:class:`EnvironmentContext` is one)."""

    @property
    def index(self) -> int: ...

    @property
    def inspection(self) -> EnvironmentInspection: ...

    @property
    def name(self) -> str: ...

    @property
    def system_prompt(self) -> str: ...


_SCALARS = frozenset({str, int, float, bool, type(None)})


@dataclass(frozen=True, slots=True)
class EnvironmentContext:
    """One discovered environment as every episode against it needs it."""

    index: int
    client: OpenEnvClient
    inspection: EnvironmentInspection
    action_schema: ActionSchema
    # Computed once here rather than once per episode (the inspection is frozen).
    action_schema_sha256: str = field(init=False, repr=False, compare=False)
    system_prompt: str = field(init=False, repr=False, compare=False)
    # Model output text -> why its action violates the schema ("" when it does not).
    _verdicts: dict[str, str] = field(init=False, repr=False, compare=False)
    # Model output text -> its parsed flat action object, or why it is not one.
    _actions: dict[str, dict[str, Any] | str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        digest = str(action_schema_sha256(self.inspection.schema_.action))
        object.__setattr__(self, "action_schema_sha256", digest)
        object.__setattr__(self, "system_prompt", system_prompt(self.inspection))
        object.__setattr__(self, "_verdicts", {})
        object.__setattr__(self, "_actions", {})

    def parse_action(self, output: str) -> dict[str, Any] | str:
        """:func:`parse_model_action` of ``output``: the action object or why it is not one.

        A pure function of the text, remembered like the schema verdicts (same bounds) for
        refusals and for objects whose values are all scalars, which a fresh shallow copy
        per call reproduces exactly (same keys in the same order, equal immutable values):
        scripted and sampled policies repeat a few outputs, and the strict parse was a
        fixed cost of every step.
        """
        actions = self._actions
        known = actions.get(output)
        if known is not None:
            return dict(known) if type(known) is dict else known
        parsed = parse_model_action(output)
        if (
            len(output) <= MAX_ACTION_CHECK_CACHE_KEY_CHARS
            and len(actions) < MAX_ACTION_CHECK_CACHE_ENTRIES
            and (isinstance(parsed, str) or all(type(v) in _SCALARS for v in parsed.values()))
        ):
            actions[output] = parsed if isinstance(parsed, str) else dict(parsed)
        return parsed

    def schema_violation(self, output: str, parsed: dict[str, Any]) -> str:
        """Why ``parsed`` (the action parsed from ``output``) fails the schema, or "".

        Scripted and sampled policies repeat the same few actions, and jsonschema was the
        largest per-step cost left in the loop, so verdicts are remembered (bounded by
        MAX_ACTION_CHECK_CACHE_ENTRIES / MAX_ACTION_CHECK_CACHE_KEY_CHARS). The key is the
        model's output text rather than the action: the action is a pure function of it
        (:func:`parse_model_action`), so equal keys mean equal actions, with no encoding
        step on a hit; the schema is fixed for the environment's lifetime.
        """
        verdicts = self._verdicts
        known = verdicts.get(output)
        if known is not None:
            return known
        reason = self.action_schema.violation(parsed)
        if (
            len(output) <= MAX_ACTION_CHECK_CACHE_KEY_CHARS
            and len(verdicts) < MAX_ACTION_CHECK_CACHE_ENTRIES
        ):
            verdicts[output] = reason
        return reason

    @property
    def name(self) -> str:
        return self.inspection.identity.metadata.name
