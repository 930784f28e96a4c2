"""The console script attaches only the ``openenv`` subcommand it runs.

``openenv verify`` is run once per bundle, often on small ones, where start-up is most of
what a user waits for; it must not load the collector's stack (httpx, websockets, the
OpenEnv client). Run through the real entry point in a fresh interpreter, since an
import, once made, stays in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kiln_verify.testing.bundles import build_fixture_bundle

_PROBE = """
import json, sys
sys.argv = ["kiln-verify", *sys.argv[1:]]
from kiln_verify.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
loaded = [name for name in ("httpx", "websockets", "kiln_verify.openenv.protocol.client",
          "kiln_verify.openenv.collect") if name in sys.modules]
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""

_HEAVY = [
    "httpx",
    "websockets",
    "kiln_verify.openenv.protocol.client",
    "kiln_verify.openenv.collect",
]


def _run(*args: str) -> tuple[str, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=False
    )
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1])


def test_openenv_verify_loads_no_collector_stack(tmp_path: Path) -> None:
    bundle = build_fixture_bundle(tmp_path)
    out, probe = _run("openenv", "verify", "--summary", str(bundle.summary), "--json")
    assert probe == {"code": 0, "loaded": []}
    report = json.loads(out)
    assert report["schema"] == "kiln.openenv-verification.v1"
    assert report["rollouts"] == 10


def test_other_subcommands_still_load_their_stack() -> None:
    _, probe = _run("openenv", "rollout", "--help")
    assert probe["code"] == 0
    assert probe["loaded"] == _HEAVY


def test_group_help_lists_every_subcommand() -> None:
    out, probe = _run("openenv", "--help")
    assert probe["code"] == 0
    for name in ("inspect", "tasks", "verify", "rollout", "replay", "evaluate"):
        assert f"\n  {name}  " in out
