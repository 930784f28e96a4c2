"""The two installs, `constraints.txt` and the plain `train` extra, against the runner's lock.

The reference runner (``train.py``) refuses an environment that differs from its lock
(``kiln_verify/hf/runner/requirements.lock``). So:

- the measured install: both README set-up commands install with ``-c constraints.txt``,
  and the HF round-trip tests run the runner in the test environment, so every package the
  lock names is pinned in the constraints at exactly the lock's version;
- the plain install: ``pip install 'kiln-verify[train]'`` without constraints once resolved
  accelerate 1.16.0, which every exported bundle's ``train.py --verify-only`` refused. So
  the ``train`` extra pins exactly the lock's packages at exactly the lock's versions,
  package by package, and the README says which install gives which guarantee.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "kiln_verify" / "hf" / "runner" / "requirements.lock"
CONSTRAINTS = ROOT / "constraints.txt"

_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)$")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            name = _name(match.group(1))
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


def _train_extra() -> dict[str, Requirement]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        project = tomllib.load(handle)["project"]
    extra: dict[str, Requirement] = {}
    for line in project["optional-dependencies"]["train"]:
        requirement = Requirement(line)
        name = _name(requirement.name)
        assert name not in extra, f"the train extra names {name} twice"
        extra[name] = requirement
    return extra


def test_the_train_extra_is_the_runner_lock_package_by_package() -> None:
    lock, extra = _pins(LOCK), _train_extra()
    assert sorted(extra) == sorted(lock), (
        f"the train extra names {sorted(extra)}, the runner's lock {sorted(lock)}: a locked "
        "package left out of the extra installs at any version (train.py refuses all but "
        "one), and a package only in the extra is not checked by the runner"
    )
    for name, version in lock.items():
        requirement = extra[name]
        assert str(requirement.specifier) == f"=={version}", (
            f"the train extra asks for {name}{requirement.specifier}, the runner's lock pins "
            f"{version}: pin exactly the lock's version (train.py refuses any other)"
        )
        assert requirement.marker is None, f"{name}: the runner's lock has no markers"


def test_the_check_finds_a_range_in_the_extra() -> None:
    assert str(Requirement("accelerate>=1.15").specifier) != "==1.15.0"
    assert str(Requirement("transformers[serving]==5.24.0").specifier) == "==5.24.0"


def test_the_readme_says_which_install_gives_which_guarantee() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install 'kiln-verify[train]'" in text
    assert "requirements.lock" in text
