"""Where environments list the moves that are legal right now, and how to read them.

There is no OpenEnv field for it, but environments converge on a handful of names: the
oracle's games and OpenSpiel-style servers say ``legal_actions``, chess and board games
``legal_moves``, text games ``valid_actions``. Some put the list in the observation's
``metadata`` instead. A list item is either a complete action object or the value of the
action's single required property; the caller decides which (it knows the schema).
"""

from __future__ import annotations

from typing import Any, Final

#: Observation keys that hold the legal moves, in the order they are looked up.
LEGAL_MOVE_KEYS: Final[tuple[str, ...]] = ("legal_actions", "legal_moves", "valid_actions")
#: At most this many moves are read (an environment may list thousands).
MAX_LEGAL_MOVES: Final = 4096


def legal_moves(observation: Any) -> list[Any]:
    """The first non-empty list under :data:`LEGAL_MOVE_KEYS`, top level first, then in
    ``metadata``; ``[]`` when there is none (then the action schema decides)."""
    if not isinstance(observation, dict):
        return []
    places: list[Any] = [observation, observation.get("metadata")]
    for place in places:
        if not isinstance(place, dict):
            continue
        for key in LEGAL_MOVE_KEYS:
            moves = place.get(key)
            if isinstance(moves, list) and moves:
                return moves[:MAX_LEGAL_MOVES]
    return []
