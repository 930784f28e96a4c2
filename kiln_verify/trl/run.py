"""The state one process shares across its TRL environment instances.

One OpenEnv client (inspected once: identity, schema, compiled action schema), the
background loop its sessions live on, the collection options every episode runs under,
the seed rule, and the episodes of the current batch in the order TRL reset them. The
factory's instances, the ``rollout_func`` and the recorder all read it; nothing here
imports TRL.

The seed rule (docs/trl.md): group ``g`` of this process (counted from 0 over the whole
run, in the order TRL resets its rollouts) uses seed ``seed_start + rank x
TRL_RANK_SEED_STRIDE + g`` (``rank``: the launcher's, :mod:`.ranks`), and its reset
payload is the row's ``reset`` object with ``seed`` set
(:func:`~kiln_verify.openenv.records.serialize.effective_reset_payload`). So the groups
of one step's bundle have consecutive seeds from that bundle's ``seed_start``, which is
what ``openenv verify`` checks, and a rerun with the same data order resets the environment
identically.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.errors import KilnError, TrlBatchAmbiguous, TrlResetFieldReserved, UsageError
from kiln_verify.limits import TRL_RANK_SEED_STRIDE
from kiln_verify.openenv.collect.controls import CollectionControls, CollectionOptions
from kiln_verify.openenv.collect.engine import inspection_record
from kiln_verify.openenv.collect.environment import EnvironmentContext
from kiln_verify.openenv.collect.plan import GroupPlan
from kiln_verify.openenv.protocol.client import Inspection, OpenEnvClient
from kiln_verify.openenv.protocol.session import Session
from kiln_verify.openenv.records.serialize import effective_reset_payload, seed_free_template
from kiln_verify.records import I64_MAX
from kiln_verify.trl.loop import BackgroundLoop
from kiln_verify.trl.ranks import process_rank

__all__ = ["RESERVED_RESET_FIELDS", "OpenEnvRun", "reset_template"]

RESERVED_RESET_FIELDS = frozenset({"seed", "episode_id"})
"""Reset fields the seed rule and the server own; a row may not set them."""


def reset_template(row: Mapping[str, Any]) -> dict[str, Any]:
    """The seed-free reset template a dataset row asks for: its ``reset`` object, or ``{}``."""
    template = row.get("reset")
    if template is None:
        return {}
    if not isinstance(template, Mapping):
        raise TrlBatchAmbiguous("a row's `reset` must be a JSON object of reset fields")
    clash = sorted(RESERVED_RESET_FIELDS & set(template))
    if clash:
        raise TrlResetFieldReserved(
            f"a dataset row sets the reserved reset field {clash[0]!r}; the seed rule owns it"
        )
    try:
        dumps_canonical(dict(template))
    except (KilnError, TypeError, ValueError):
        raise TrlBatchAmbiguous("a row's `reset` object is not JSON") from None
    return seed_free_template(template)


def _row_key(row: Mapping[str, Any]) -> bytes:
    """What must be equal across a group's candidates: the row's prompt and reset object."""
    try:
        return dumps_canonical({"prompt": row.get("prompt"), "reset": row.get("reset")})
    except (KilnError, TypeError, ValueError):
        raise TrlBatchAmbiguous("a row's `prompt` or `reset` is not JSON") from None


@dataclasses.dataclass(slots=True)
class Slot:
    """One rollout of the current batch: its group plan, candidate index and row key."""

    plan: GroupPlan
    candidate: int
    row_key: bytes
    template: dict[str, Any]


class OpenEnvRun:
    """One OpenEnv server as every TRL rollout of this process sees it (see the module text)."""

    def __init__(
        self,
        url: str,
        *,
        options: CollectionOptions,
        credential_env: str | None = None,
        environ: Mapping[str, str] | None = None,
        rank: int | None = None,
    ) -> None:
        rank = process_rank(rank)  # before any connection: a wrong rank opens nothing
        self.url = url
        self.options = options
        self.rank = rank
        self.credential_env = credential_env
        self._environ = environ
        self.seed_base = options.seed_start + rank * TRL_RANK_SEED_STRIDE
        if self.seed_base > I64_MAX:
            raise UsageError("`seed_start` + rank x stride exceeds the largest i64 seed")
        # The controls every episode machine runs under (one group: the bound checks pass);
        # a bundle's own controls are built per batch by the recorder.
        self.controls = CollectionControls.create(
            [url], options=dataclasses.replace(options, groups=1, state_check=False)
        )
        self.loop = BackgroundLoop()
        self.client = OpenEnvClient(url, credential_env=credential_env, environ=environ)
        try:
            self.inspection: Inspection = self.loop.run(self.client.inspect())
        except BaseException:
            self.close()
            raise
        self.context = EnvironmentContext(
            0, self.client, inspection_record(self.inspection), self.inspection.action_schema
        )
        self.groups_started = 0
        self.batch: list[Slot] = []
        self.batch_seed_start = self.seed_base
        self.failure: KilnError | None = None
        self._closing: list[concurrent.futures.Future[None]] = []

    @property
    def group_size(self) -> int:
        return self.options.group_size

    def credential(self) -> dict[str, str] | None:
        """``{variable: token}`` for a client in the recording worker, which re-inspects
        the server as this run's client does (``None``: no bearer credential)."""
        if self.credential_env is None:
            return None
        source = os.environ if self._environ is None else self._environ
        return {self.credential_env: source.get(self.credential_env, "")}

    def close_later(self, session: Session) -> None:
        """Close a failed or abandoned episode's session on the loop without waiting: its
        close handshake overlaps the rest of the batch instead of holding up TRL's loop."""
        self._closing.append(self.loop.submit(session.close()))

    def settle(self) -> None:
        """Wait for the sessions being closed (a new batch needs their server slots back)."""
        closing, self._closing = self._closing, []
        for future in closing:
            with contextlib.suppress(Exception):  # a failed close leaves nothing to undo
                future.result(30)

    def begin_batch(self) -> None:
        """A new batch starts: its groups are numbered from 0 again, its seeds continue."""
        self.settle()
        self.batch = []
        self.batch_seed_start = self.seed_base + self.groups_started
        self.failure = None

    def next_slot(self, row: Mapping[str, Any]) -> Slot:
        """The next rollout of the batch, in TRL's reset order: ``group_size`` consecutive
        rollouts of one row form a group (TRL's ``RepeatSampler``); anything else is refused."""
        template = reset_template(row)
        key = _row_key(row)
        index = len(self.batch)
        candidate = index % self.group_size
        if candidate == 0:
            if self.batch and self.batch[0].template != template:
                raise TrlBatchAmbiguous(
                    "rows of one batch ask for different reset templates; one step's bundle "
                    "holds one template per environment (docs/trl.md)"
                )
            seed = self.seed_base + self.groups_started
            if seed > I64_MAX:
                raise UsageError("the group seed exceeds the largest i64 seed")
            self.groups_started += 1
            plan = GroupPlan(
                index // self.group_size, 0, seed, effective_reset_payload(template, seed)
            )
        else:
            first = self.batch[index - candidate]
            if first.row_key != key:
                raise TrlBatchAmbiguous(
                    f"rollout {index} is candidate {candidate} of group "
                    f"{index // self.group_size} but comes from another row than its "
                    "candidate 0: TRL's batch does not repeat each row `num_generations` times "
                    "consecutively"
                )
            plan = first.plan
        slot = Slot(plan, candidate, key, template)
        self.batch.append(slot)
        return slot

    def fail(self, error: KilnError) -> None:
        """Remember the batch's first failure: the step must fail and record nothing."""
        if self.failure is None:
            self.failure = error

    def close(self) -> None:
        self.settle()
        with contextlib.suppress(Exception):  # best effort: the loop stops below anyway
            self.loop.run(self.client.aclose(), timeout=30)
        self.loop.close()
