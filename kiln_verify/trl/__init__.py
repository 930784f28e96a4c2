"""Online GRPO in TRL on OpenEnv environments, every recorded step a verifiable bundle.

=================  ========================================================================
module             job
=================  ========================================================================
``signature``      the action schema as a Python tool signature (refused when inexpressible)
``loop``           the background event loop TRL's synchronous calls run the client on
``run``            one server as a process's rollouts see it: client, options, seed rule
``episode``        one rollout as the collector's episode machine, driven by tool calls
``factory``        :class:`OpenEnvToolFactory`, TRL's ``environment_factory``
``rollout``        :class:`OpenEnvRolloutFunc`, TRL's ``rollout_func`` for plain step loops
``identity``       the behaviour weights: base model identity + the adapter at that step
``corpus``         the recorded-GRPO rows of a tool-calling batch, replayed before kept
``batch``          what the recorder captured of one batch, and the bundle's files
``logprobs``       behaviour log-probabilities: the sampler's, or TRL's own training forward's
``snapshot``       the adapter's bytes each recorded step, proven equal to PEFT's own save
``worker``         the process that builds each corpus, re-inspects and publishes
``trainer_check``  the trainer settings a recorded batch needs, refused before the first
``recorder``       :class:`BatchRecorder`: one bundle per recorded optimizer step
=================  ========================================================================

Part of the ``train`` extra; TRL, transformers and torch are imported by the modules that
need them, never by this package (docs/trl.md). The entry points are ``__all__`` (listed in
docs/python-api.md, "TRL"), each imported from its module on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kiln_verify.core.lazy import lazy_exports

if TYPE_CHECKING:
    from kiln_verify.trl.factory import OpenEnvEnvironment, OpenEnvToolFactory
    from kiln_verify.trl.recorder import BatchRecorder
    from kiln_verify.trl.rollout import OpenEnvRolloutFunc

__all__ = ["BatchRecorder", "OpenEnvEnvironment", "OpenEnvRolloutFunc", "OpenEnvToolFactory"]

_WHERE = {
    "OpenEnvToolFactory": "kiln_verify.trl.factory",
    "OpenEnvEnvironment": "kiln_verify.trl.factory",
    "BatchRecorder": "kiln_verify.trl.recorder",
    "OpenEnvRolloutFunc": "kiln_verify.trl.rollout",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
