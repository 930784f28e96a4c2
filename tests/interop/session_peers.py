"""Every OpenEnv behaviour peer the suite plays, in one process (``behaviour_urls``).

The behaviour peers (``behaviour_peers.py``), the late-state peer (``state_peers.py``) and
the seed peers (``seed_peers.py``) are all openenv's own ``create_app`` serving an
environment written against openenv's API; each peer still has its own app, socket and
session table. Hosting them together means the openenv import is paid once per test
session instead of once per peer module (``tests/conftest.py``, ``tests/scheduling.py``).
"""

from __future__ import annotations

import sys

from tests.interop import openenv_peers
from tests.interop.behaviour_peers import BEHAVIOUR_PEERS
from tests.interop.seed_peers import SEED_PEERS
from tests.interop.state_peers import STATE_PEERS

SESSION_PEERS = {**BEHAVIOUR_PEERS, **STATE_PEERS, **SEED_PEERS}

if __name__ == "__main__":
    raise SystemExit(openenv_peers.main_with(SESSION_PEERS, sys.argv[1:]))
