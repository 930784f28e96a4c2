"""Complete rediscovery of one captured environment, compared with its identity (§7.1 step 3).

The live identity (health, the four discovery documents, their digests) is compared with
the captured one (§8.4: identity fields, ``schema_sha256``, the complete
``discovery_sha256`` when recorded, and the action/observation/state schemas). Under a
remap the captured identity is first moved to the new base URL
(:func:`~kiln_verify.openenv.replay.remap.remapped_identity`): only the two URL fields
change, everything else must still match exactly. Token rotation is invisible: the token
is never part of an identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kiln_verify.core.digest import canonical_digest
from kiln_verify.openenv.protocol.identity import compare_identities
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.reports import EnvironmentRemap
from kiln_verify.openenv.replay.candidate import ReplayTarget
from kiln_verify.openenv.replay.compare import Difference, render
from kiln_verify.openenv.replay.remap import remapped_identity

__all__ = ["IdentityDrift", "rediscover"]


@dataclass(frozen=True, slots=True)
class IdentityDrift:
    """The changed identity fields of one environment, rendered for the drift report."""

    target: ReplayTarget
    when: str
    changed: tuple[str, ...]
    difference: Difference
    metadata_name_changed: bool
    remap: EnvironmentRemap | None


def _schema_parts(inspection: EnvironmentInspection) -> dict[str, Any]:
    schema = inspection.schema_
    return {"action": schema.action, "observation": schema.observation, "state": schema.state}


def _changed_values(
    changed: tuple[str, ...],
    identity: dict[str, Any],
    other: dict[str, Any],
    schema: Mapping[str, Any],
) -> dict[str, Any]:
    """Changed fields only; schema parts as digests, metadata as its changed keys."""
    out: dict[str, Any] = {}
    for name in changed:
        if name.startswith("schema."):
            out[name] = str(canonical_digest(schema.get(name.removeprefix("schema."))))
        elif name == "metadata":
            mine, theirs = identity.get(name) or {}, other.get(name) or {}
            keys = sorted(set(mine) | set(theirs))
            out[name] = {k: mine.get(k) for k in keys if mine.get(k) != theirs.get(k)}
        else:
            out[name] = identity.get(name)
    return out


async def rediscover(
    target: ReplayTarget,
    captured: EnvironmentInspection,
    when: str,
    remap: EnvironmentRemap | None = None,
) -> IdentityDrift | None:
    """Rediscover ``target``; ``None`` when its identity is the captured one."""
    live = await target.client.inspect()
    expected = remapped_identity(captured.identity.to_identity(), target.client.url.base_url)
    expected_schema = _schema_parts(captured)
    actual_schema = live.environment_schema
    changed = tuple(
        compare_identities(
            expected, live.identity, expected_schema=expected_schema, actual_schema=actual_schema
        )
    )
    if not changed:
        return None
    recorded, current = expected.to_json(), live.identity.to_json()
    difference = Difference(
        ", ".join(changed),
        render(_changed_values(changed, recorded, current, expected_schema), sort_keys=False),
        render(_changed_values(changed, current, recorded, actual_schema), sort_keys=False),
    )
    return IdentityDrift(
        target,
        when,
        changed,
        difference,
        expected.metadata.name != live.identity.metadata.name,
        remap,
    )
