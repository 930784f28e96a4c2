"""``environment_factory`` for TRL's ``GRPOTrainer``, backed by kiln-verify's OpenEnv client.

``OpenEnvToolFactory(url, options=CollectionOptions(group_size=G, ...))`` inspects the
server once (identity, schema, compiled action schema; the collector's own inspection) and
derives the action tool from the advertised action schema (:mod:`.signature`: refused at
construction when no signature can express it). Calling the factory returns an
environment instance, as TRL expects; each instance has exactly three public methods,
because TRL turns every public method into a tool:

* ``reset(**row) -> str``: the next rollout of the batch (:meth:`OpenEnvRun.next_slot`:
  group and candidate from TRL's reset order, the seed rule, the row's ``reset`` object as
  the reset template, reserved fields refused), sent as the effective reset payload on the
  instance's one session (opened capacity-aware at its first reset, kept across its
  episodes, replaced when it failed or the server closed it); returns the contract's
  reset-observation text, which TRL appends to the row's last user message;
* the action tool (default name ``step``): one environment step per call
  (:class:`~kiln_verify.trl.episode.Episode`);
* ``get_reward() -> float``: the episode return under the contract's rules (tagged rewards
  summed by their training value, ``protocol_error_reward`` per protocol or harness error,
  a rollout that stopped calling the tool while the episode was open ends as a reply
  without an action), refused when not finite; raises the batch's environment failure so
  the training step fails with nothing recorded.

TRL pools instances and resets each pooled instance once per batch, in batch order. So the
first reset of an instance that already played in the current batch starts a new batch
here: that holds whichever instance TRL probed first, and also when the user called the
factory before TRL did (an instance TRL never resets takes no part).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from kiln_verify.errors import (
    TrlBatchAmbiguous,
    TrlEpisodeFailed,
    TrlError,
    TrlRewardNotFinite,
)
from kiln_verify.openenv.collect.controls import CollectionOptions
from kiln_verify.trl.episode import Episode
from kiln_verify.trl.run import OpenEnvRun
from kiln_verify.trl.signature import build_tool, tool_parameters

__all__ = ["OpenEnvEnvironment", "OpenEnvToolFactory"]


class OpenEnvEnvironment:
    """One TRL environment instance (see the module text). Subclassed per factory with the
    action tool as its one extra public method."""

    def __init__(self, factory: OpenEnvToolFactory) -> None:
        self._factory = factory
        self._episode: Episode | None = None

    def reset(self, **row: Any) -> str:
        """Start this instance's next episode; the reset observation's text."""
        factory = self._factory
        previous = self._episode
        if previous is not None and any(e is previous for e in factory.batch):
            factory._begin_batch()  # this instance already played in this batch: a new one
        kept = previous.release() if previous is not None else None
        run = factory.run
        episode = Episode(run, run.next_slot(row))
        factory.batch.append(episode)
        self._episode = episode
        return episode.start(kept)

    def _act(self, arguments: dict[str, Any]) -> str:
        if self._episode is None:
            raise TrlBatchAmbiguous("the action tool was called before reset")
        return self._episode.act(arguments)

    def get_reward(self) -> float:
        """The episode return (contract rules), once the rollout ended."""
        run = self._factory.run
        if isinstance(run.failure, TrlError):
            raise type(run.failure)(run.failure.rule) from run.failure
        if run.failure is not None:
            raise TrlEpisodeFailed(
                f"an episode of this batch failed ({run.failure.code}: {run.failure.rule}); "
                "the step fails and records nothing"
            ) from run.failure
        if self._episode is None:
            raise TrlBatchAmbiguous("get_reward was called before reset")
        if not self._factory.ending:
            # TRL asks for rewards once it generated the whole batch: every rollout ended,
            # and their final states are read together (Episode.end), not one per call
            self._factory.ending = True
            for episode in self._factory.batch:
                episode.end()
        value = self._episode.finish().episode_return
        if not math.isfinite(value):
            raise TrlRewardNotFinite(f"the episode return is {value!r}")
        return value


class OpenEnvToolFactory:
    """TRL's ``environment_factory`` for one OpenEnv server (see the module text).

    ``options`` are the collector's options (``group_size`` must equal TRL's
    ``num_generations``; ``max_steps``, ``protocol_error_reward``,
    ``max_recoverable_errors``, ``capacity_wait_seconds``, ``seed_start`` apply to every
    episode); ``rank`` is the process's global rank in a multi-process run (the seed rule
    and the bundle directory): by default the launcher's (:mod:`.ranks`), refused when
    given and different from it.
    """

    def __init__(
        self,
        url: str,
        *,
        options: CollectionOptions | None = None,
        tool_name: str = "step",
        credential_env: str | None = None,
        environ: Mapping[str, str] | None = None,
        rank: int | None = None,
    ) -> None:
        chosen = options if options is not None else CollectionOptions(thinking=False)
        if chosen.thinking:
            raise TrlBatchAmbiguous(
                "`thinking` must be off: TRL's tool loop records no separate reasoning",
            )
        self.run = OpenEnvRun(
            url, options=chosen, credential_env=credential_env, environ=environ, rank=rank
        )
        try:
            action = self.run.inspection.environment_schema.get("action")
            parameters = tool_parameters(action)
            description = self.run.inspection.identity.metadata.description or ""
            self.tool = build_tool(tool_name, description, parameters, OpenEnvEnvironment._act)
        except BaseException:
            self.run.close()
            raise
        self.tool_name = tool_name
        self.environment_class: type[OpenEnvEnvironment] = type(
            "OpenEnvEnvironment",
            (OpenEnvEnvironment,),
            {tool_name: self.tool, "__module__": __name__, "__doc__": OpenEnvEnvironment.__doc__},
        )
        self.instances: list[OpenEnvEnvironment] = []
        self.batch: list[Episode] = []
        self.ending = False
        self._tool_schema: dict[str, Any] | None = None

    def __call__(self) -> OpenEnvEnvironment:
        instance = self.environment_class(self)
        self.instances.append(instance)
        return instance

    def tool_schema(self) -> dict[str, Any]:
        """The tool's JSON schema exactly as TRL hands it to the chat template (a copy)."""
        if self._tool_schema is None:
            from transformers.utils.chat_template_utils import get_json_schema

            probe = self.environment_class(self)  # bound like TRL binds it; never reset
            self._tool_schema = get_json_schema(getattr(probe, self.tool_name))
        return copy.deepcopy(self._tool_schema)

    def _begin_batch(self) -> None:
        for episode in self.batch:
            if episode.outcome is None:
                episode.abandon()
        self.batch = []
        self.ending = False
        self.run.begin_batch()

    def close(self) -> None:
        """Close every instance's session and stop the background loop."""
        for instance in self.instances:  # the batch's episodes are its instances' current ones
            if instance._episode is not None:
                instance._episode.abandon()
        self.run.close()
