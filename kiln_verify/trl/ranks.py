"""Which process of a multi-process training run this is, as the launcher says.

``torchrun`` and ``accelerate launch`` start one process per rank and tell each its global
rank in ``RANK`` (with ``WORLD_SIZE`` and ``LOCAL_RANK``); once the process group exists,
``torch.distributed.get_rank()`` says the same. The seed rule (docs/trl.md) and the
``rank-RRRRR`` bundle directory take that rank, so two processes of one run never share a
group seed or a path. A ``rank`` passed by hand is only a cross-check: one that differs
from the launcher's would give two processes the same seeds and directory, and is refused
before anything is inspected, opened or trained (``trl_batch_ambiguous``, as the
recorder's own check against ``trainer.accelerator.process_index`` at ``attach``).

Nothing here imports torch: a process that has not imported ``torch.distributed`` has no
process group, so only the environment can name its rank.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from kiln_verify.errors import TrlBatchAmbiguous, UsageError

__all__ = ["distributed_rank", "process_rank"]


def _integer(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name)
    if text is None or text == "":
        return None
    if not text.isascii() or not text.isdecimal():
        raise UsageError(f"the launcher's {name} must be a non-negative integer")
    return int(text)


def distributed_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's global rank: ``torch.distributed``'s once its process group exists,
    else the launcher's ``RANK`` (checked below ``WORLD_SIZE`` when that is set); ``None``
    outside a multi-process launch."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    source = os.environ if environ is None else environ
    rank = _integer(source, "RANK")
    world = _integer(source, "WORLD_SIZE")
    if rank is not None and world is not None and rank >= world:
        raise UsageError(f"the launcher's RANK {rank} is not below its WORLD_SIZE {world}")
    return rank


def process_rank(rank: int | None, environ: Mapping[str, str] | None = None) -> int:
    """The rank the seed rule and the bundle paths use: ``rank`` when given (it must equal
    the launcher's, if any), else the launcher's, else 0."""
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
        raise UsageError("`rank` must be a non-negative integer (or None: the launcher's)")
    found = distributed_rank(environ)
    if rank is None:
        return 0 if found is None else found
    if found is not None and found != rank:
        raise TrlBatchAmbiguous(
            f"rank={rank} was passed, but the launcher runs this process as rank {found} "
            "(RANK / torch.distributed): two processes would share seeds and bundle "
            "directories; leave `rank` unset to take the launcher's"
        )
    return rank
