"""The 23 oracle servers in serving order (counter, ten games, four synthesis tasks, eight
math), and the MCP tool environments beside them.

The order matters: the interop gate gives server i the port `base + i`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from oracle.base import Environment

GAMES: tuple[str, ...] = (
    "bandit", "cartpole", "snake", "g2048", "wordle",
    "blackjack", "maze", "pong", "connect4", "kuhn",
)
TASKS: tuple[str, ...] = ("dyna", "inducto", "logic", "filtro")
MATH: tuple[str, ...] = (
    "measure", "algebra", "change", "space", "discrete", "chance", "evidence", "reason",
)
SERVERS: tuple[str, ...] = ("counter", *GAMES, *TASKS, *MATH)
#: MCP tool environments: served by name like the others, but not part of the 23-server
#: matrix the interop gate launches (its counts and ports are pinned to Kiln's).
TOOLS: tuple[str, ...] = ("toolbox",)
#: Every name `environment_class` knows.
ALL_SERVERS: tuple[str, ...] = (*SERVERS, *TOOLS)

# server name -> "module:ClassName"
_LOCATIONS: Mapping[str, str] = {
    "counter": "oracle.envs.counter:CounterEnvironment",
    **{name: f"oracle.envs.{name}:{name.capitalize()}Environment" for name in GAMES},
    **{name: f"oracle.envs.synthesis.{name}:{name.capitalize()}Environment" for name in TASKS},
    **{name: f"oracle.envs.math.{name}:{name.capitalize()}Environment" for name in MATH},
    "toolbox": "oracle.envs.toolbox:ToolboxEnvironment",
}


def environment_class(name: str) -> type[Environment]:
    """The environment class for a server name; `KeyError` names the inventory."""
    try:
        location = _LOCATIONS[name]
    except KeyError:
        raise KeyError(
            f"unknown oracle server {name!r}; known: {', '.join(ALL_SERVERS)}"
        ) from None
    module_name, class_name = location.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise TypeError(f"{location} is not an oracle Environment")
    return cls
