"""Run ``scripts/check_miniopenenv_interop.sh`` and report its counts as metrics.

The gate prints ``all N servers healthy`` once its inventory is up and ends with pytest's
summary line (``11 passed in 42.0s``); both are parsed from the gate's own output, which is
passed through unchanged. The exit status is the gate's.

    python qualification/tools/interop_gate.py --python PY --kiln-verify KV --port P
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qualification.tools.metrics import emit, fail

REPO = Path(__file__).resolve().parents[2]
HEALTHY = re.compile(r"^all (\d+) servers healthy$", re.MULTILINE)
SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+) in [0-9.]+s", re.MULTILINE)
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def parse(output: str) -> dict[str, int]:
    """Counts from the gate's output; absent categories are 0, absent lines are -1."""
    healthy = HEALTHY.findall(output)
    counts = {"servers": int(healthy[-1]) if healthy else -1}
    summaries = SUMMARY.findall(output)
    for kind in ("passed", "failed", "skipped", "errors", "deselected"):
        counts[kind] = 0 if summaries else -1
    if summaries:
        for number, kind in COUNT.findall(summaries[-1]):
            counts["errors" if kind.startswith("error") else kind] = int(number)
    return counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--python", required=True, help="interpreter that runs the gate's suite")
    p.add_argument("--kiln-verify", required=True, help="the kiln-verify command")
    p.add_argument("--port", type=int, required=True, help="base port of the oracle servers")
    args = p.parse_args()
    env = dict(os.environ, PYTHON=args.python, KILN_VERIFY=args.kiln_verify,
               KILN_OPENENV_INTEROP_PORT=str(args.port))  # fmt: skip
    env.pop("OPENENV_INTEROP_ROOT", None)
    process = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "check_miniopenenv_interop.sh"), "-q"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        sys.stdout.write(line)
        lines.append(line)
    code = process.wait()
    counts = parse("".join(lines))
    for name, value in counts.items():
        emit(f"gate.{name}", value, "count")
    emit("gate.exit_code", code)
    if code != 0:
        return fail(f"the interop gate exited {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
