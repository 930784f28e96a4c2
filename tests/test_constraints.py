"""The install the suite was measured with: `constraints.txt` against the runner's lock.

Both README set-up commands install with ``-c constraints.txt``. The reference runner
(``train.py``) refuses an environment that differs from its lock, and the HF round-trip
tests run it in the test environment, so every package the lock names must be pinned in
the constraints at exactly the lock's version; and the README must use the file.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "kiln_verify" / "hf" / "runner" / "requirements.lock"
CONSTRAINTS = ROOT / "constraints.txt"

_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)$")


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            assert name not in pins, f"{path.name} pins {name} twice"
            pins[name] = match.group(2)
    return pins


def test_constraints_pin_every_package_of_the_runner_lock_at_its_version() -> None:
    lock, constraints = _pins(LOCK), _pins(CONSTRAINTS)
    assert lock, "the lock names no package"
    for name, version in lock.items():
        assert constraints.get(name) == version, (
            f"constraints.txt pins {name} at {constraints.get(name)}, the runner's lock at "
            f"{version}: pin the lock's version (train.py refuses any other)"
        )


def test_every_constraint_line_is_an_exact_pin_or_a_comment() -> None:
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        assert _PIN.match(line), line
        assert "+" not in line, f"{line}: a local build suffix cannot be installed elsewhere"


def test_both_readme_set_up_commands_install_with_the_constraints() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)[:2]
    assert len(blocks) == 2
    for block in blocks:
        assert "pip install" in block, block
        assert "-c constraints.txt" in block, block
