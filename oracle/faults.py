"""Fault profiles: deliberate, documented misbehaviour a client's tests can provoke.

Each profile is `name` or `name=value` (see `oracle/README.md`, "Fault profiles"), parsed
into one immutable `Faults` value per server. Parsing is strict, because a typo in a fault
name must not silently give a well-behaved server to a test that expects a broken one.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

DEFAULT_OVERSIZED_BYTES = 1024 * 1024
DEFAULT_UNSOLICITED_SECONDS = 0.2
_ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class FaultError(ValueError):
    """A fault profile that cannot be parsed; the message names the accepted syntax."""


@dataclasses.dataclass(frozen=True)
class Faults:
    """The active fault profiles of one server; the default value is a well-behaved server."""

    drop_after_steps: int | None = None
    binary_frame: bool = False
    oversized_frame: int | None = None
    wrong_response_type: bool = False
    unsolicited_frame: float | None = None
    idle_close: float | None = None
    delay_step: float | None = None
    reflect_authorization: bool = False
    #: Name of the environment variable the bearer token is read from (never the token).
    require_bearer: str | None = None
    identity_drift: int | None = None
    nondeterministic_reset: bool = False
    #: Reset plays the game of a seed of its own (a count of resets), never the one asked for.
    ignore_seed: bool = False
    #: Reset never keeps a requested `episode_id`: every episode gets a fresh one.
    ignore_episode_id: bool = False
    #: Reset draws a hidden value the seed does not fix, shown only in the state.
    unseeded_hidden_state: bool = False
    flaky_capacity: int | None = None
    factory_error: bool = False
    #: Status of `GET /list_environments`; 404 also removes the Task API (openenv-core 0.3.0).
    inventory_status: int | None = None

    def describe(self) -> list[str]:
        """The profiles in their command-line spelling, for logs and `--json` output."""
        out: list[str] = []
        for spec in _SPECS.values():
            value = getattr(self, spec.attribute)
            if value is None or value is False:
                continue
            out.append(spec.name if value is True else f"{spec.name}={_show(value)}")
        return out

    def bearer_token(self) -> bytes | None:
        """Read the token now (server start-up); a missing or empty variable is an error."""
        if self.require_bearer is None:
            return None
        token = os.environ.get(self.require_bearer, "")
        if not token:
            raise FaultError(
                f"require-bearer={self.require_bearer}: environment variable "
                f"{self.require_bearer} is unset or empty; export the token there")
        return token.encode("utf-8")


@dataclasses.dataclass(frozen=True)
class _Spec:
    name: str
    attribute: str
    value: str  # "none", "optional", "required"
    convert: Callable[[str, str], Any] | None = None
    default: Any = None


def _count(name: str, text: str, minimum: int) -> int:
    if not re.fullmatch(r"\d+", text) or int(text) < minimum:
        raise FaultError(f"{name}={text}: expected an integer >= {minimum}")
    return int(text)


def _seconds(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or value > 3600:
        raise FaultError(f"{name}={text}: expected seconds between 0 and 3600")
    return value


def _status(name: str, text: str) -> int:
    if not re.fullmatch(r"\d{3}", text) or not 400 <= int(text) <= 599:
        raise FaultError(f"{name}={text}: expected an HTTP error status between 400 and 599")
    return int(text)


def _env_var(name: str, text: str) -> str:
    if not _ENV_VAR.fullmatch(text):
        raise FaultError(
            f"{name}={text}: expected the NAME of an environment variable holding the token "
            f"(the token itself never goes on the command line)")
    return text


_SPECS: Mapping[str, _Spec] = {spec.name: spec for spec in (
    _Spec("drop-after-steps", "drop_after_steps", "required", lambda n, t: _count(n, t, 0)),
    _Spec("binary-frame", "binary_frame", "none"),
    _Spec("oversized-frame", "oversized_frame", "optional",
          lambda n, t: _count(n, t, 1), DEFAULT_OVERSIZED_BYTES),
    _Spec("wrong-response-type", "wrong_response_type", "none"),
    _Spec("unsolicited-frame", "unsolicited_frame", "optional", _seconds,
          DEFAULT_UNSOLICITED_SECONDS),
    _Spec("idle-close", "idle_close", "required", _seconds),
    _Spec("delay-step", "delay_step", "required", _seconds),
    _Spec("reflect-authorization", "reflect_authorization", "none"),
    _Spec("require-bearer", "require_bearer", "required", _env_var),
    _Spec("identity-drift", "identity_drift", "required", lambda n, t: _count(n, t, 0)),
    _Spec("nondeterministic-reset", "nondeterministic_reset", "none"),
    _Spec("ignore-seed", "ignore_seed", "none"),
    _Spec("ignore-episode-id", "ignore_episode_id", "none"),
    _Spec("unseeded-hidden-state", "unseeded_hidden_state", "none"),
    _Spec("flaky-capacity", "flaky_capacity", "required", lambda n, t: _count(n, t, 1)),
    _Spec("factory-error", "factory_error", "none"),
    _Spec("inventory-status", "inventory_status", "required", _status),
)}

FAULT_NAMES: tuple[str, ...] = tuple(_SPECS)


def parse_fault(text: str) -> tuple[str, Any]:
    """`name[=value]` -> (attribute, value)."""
    name, has_value, raw = text.strip().partition("=")
    spec = _SPECS.get(name)
    if spec is None:
        raise FaultError(f"unknown fault profile {name!r}; known: {', '.join(FAULT_NAMES)}")
    if spec.value == "none":
        if has_value:
            raise FaultError(f"{name} takes no value (write just {name!r})")
        return spec.attribute, True
    if not has_value:
        if spec.value == "required":
            raise FaultError(f"{name} needs a value: {name}=VALUE")
        return spec.attribute, spec.default
    assert spec.convert is not None
    return spec.attribute, spec.convert(name, raw)


def parse_faults(texts: Iterable[str]) -> Faults:
    """Several profiles into one `Faults`; naming a profile twice is an error."""
    values: dict[str, Any] = {}
    for text in texts:
        attribute, value = parse_fault(text)
        if attribute in values:
            raise FaultError(f"fault profile {text.partition('=')[0]!r} given twice")
        values[attribute] = value
    return Faults(**values)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)
