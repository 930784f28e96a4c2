"""Whether this host can run a step without network, and the argv prefix that does it.

Mechanism ``unshare-user-net-loopback-v1``: ``unshare --user --map-root-user --net`` (an
unprivileged user namespace owning a new network namespace) running ``netns.py``, which sets
``lo`` up and execs the step. The probe runs the same prefix once and demands that ``lo`` is
the only interface and that a loopback TCP round trip works; otherwise isolation is recorded
as not enforced and offline steps run on the host network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MECHANISM = "unshare-user-net-loopback-v1"
HELPER = Path(__file__).resolve().parent / "netns.py"


@dataclass(frozen=True)
class Isolation:
    available: bool
    mechanism: str | None
    probe: str
    prefix: tuple[str, ...]

    def wrap(self, argv: list[str]) -> list[str]:
        return [*self.prefix, "exec", "--", *argv]


def _prefix(unshare: str) -> tuple[str, ...]:
    return (
        unshare,
        "--user",
        "--map-root-user",
        "--net",
        "--",
        sys.executable,
        "-I",
        "-S",
        str(HELPER),
    )


def probe() -> Isolation:
    unshare = shutil.which("unshare")
    if not sys.platform.startswith("linux") or unshare is None:
        return Isolation(False, None, "no unshare(1) on this host", ())
    prefix = _prefix(unshare)
    try:
        result = subprocess.run(
            [*prefix, "probe"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return Isolation(False, None, f"probe could not run: {error}"[:4000], ())
    said = (result.stdout.strip() or result.stderr.strip() or f"exit {result.returncode}")[:4000]
    if result.returncode == 0 and said == "ok":
        return Isolation(True, MECHANISM, "ok: only lo, loopback round trip works", prefix)
    return Isolation(False, None, f"unavailable: {said}", ())
