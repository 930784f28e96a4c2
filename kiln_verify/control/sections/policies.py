"""``[policies.<adapter>]``: which built-in policy plays a request's ``adapter``.

Adapter ``base`` is the ``random`` policy unless the file says otherwise, so a newcomer's
``kiln-verify serve`` collects from a loopback oracle at once.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final

from kiln_verify.control.request import BASE_ADAPTER
from kiln_verify.control.sections.rules import fail, known_keys, table
from kiln_verify.limits import MAX_POLICY_OPTION_BYTES, MAX_POLICY_OPTIONS, MAX_SERVER_POLICIES
from kiln_verify.openenv.policy.registry import POLICY_NAMES

__all__ = ["PolicySpec", "default_policies", "parse_policies"]

_ADAPTER: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclasses.dataclass(frozen=True, slots=True)
class PolicySpec:
    """``[policies.<adapter>]``: a built-in policy name and its string options."""

    policy: str
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)


def default_policies() -> dict[str, PolicySpec]:
    return {BASE_ADAPTER: PolicySpec("random")}


def _policy(adapter: str, raw: Any, path: str | None) -> PolicySpec:
    where = f"[policies.{adapter[:64]}]"
    if not _ADAPTER.fullmatch(adapter) or adapter.lower() in ("none", "null"):
        raise fail(f"{where}: an adapter name is 1..128 of A-Z a-z 0-9 . _ -", path)
    values = table(raw, where, path)
    known_keys(values, {"policy", "options"}, where, path)
    name = values.get("policy")
    if name not in POLICY_NAMES:
        raise fail(f"{where}.policy must be one of {', '.join(POLICY_NAMES)}", path)
    options = table(values.get("options", {}), f"{where}.options", path)
    if len(options) > MAX_POLICY_OPTIONS:
        raise fail(f"{where}.options has more than {MAX_POLICY_OPTIONS} entries", path)
    for key, value in options.items():
        if not isinstance(value, str) or max(len(key), len(value)) > MAX_POLICY_OPTION_BYTES:
            raise fail(f"{where}.options.{key[:64]} must be a string (see docs/policies.md)", path)
    return PolicySpec(str(name), dict(options))


def parse_policies(raw: Any, environ: Mapping[str, str], path: str | None) -> dict[str, PolicySpec]:
    """The ``[policies]`` tables over the default ``base`` adapter."""
    raw_policies = table(raw, "[policies]", path)
    if len(raw_policies) > MAX_SERVER_POLICIES:
        raise fail(f"more than {MAX_SERVER_POLICIES} policy tables", path)
    policies = default_policies()
    policies.update({a: _policy(a, value, path) for a, value in raw_policies.items()})
    return policies
