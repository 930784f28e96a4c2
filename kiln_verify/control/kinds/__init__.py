"""The run kinds this server runs: the one table a new kind is added to.

``rollout`` collects and publishes a bundle; ``train`` (:mod:`.train`) collects with the
resident model, trains an adapter with the exported bundle's own ``train.py`` and keeps the
trainer's evidence in the run (it needs ``serve --model``: without a resident model its
admission answers ``model_not_loaded``). A later kind adds its module here and one entry
to :data:`KINDS`; the registry, the store and the artifact route do not change.
"""

from __future__ import annotations

from kiln_verify.control.kind import KindTable
from kiln_verify.control.kinds.rollout import ROLLOUT
from kiln_verify.control.kinds.train import TRAIN

__all__ = ["KINDS", "ROLLOUT", "TRAIN"]

KINDS: KindTable = {ROLLOUT.name: ROLLOUT, TRAIN.name: TRAIN}
