"""The interop gate script itself, end to end (``scripts/check_miniopenenv_interop.sh``).

The first test runs the whole gate against our oracle inventory (23 servers and the full
``tests/gate`` suite), so the gate runs in CI as part of the ordinary test command. The
others drive the external-checkout path for real: a temporary "oracle checkout" whose
Makefile defines ``ARCADE_GAMES``/``ARCADE_TASKS``/``ARCADE_MATH`` and builds each
``build/rel/bin/NAME`` as a tiny wrapper around ``kiln-verify oracle serve NAME``. Every
run uses a random free base port and checks that no server process outlives the script.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_miniopenenv_interop.sh"
FULL_INVENTORY = 23
STARTED = re.compile(r"^started (\S+) pid (\d+) port (\d+)$", re.MULTILINE)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the gate needs bash")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (what a bind to port 0 draws from)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_base_port(count: int) -> int:
    """A random base port with ``count`` consecutive free ports above it, all below the
    ephemeral range: the rest of the suite binds port 0 in parallel, and a port the kernel
    hands one of those tests between this check and the gate's bind was seen once."""
    top = min(_ephemeral_start(), 60000) - count
    for _ in range(200):
        base = random.randint(20000, top)
        if all(_port_free(base + offset) for offset in range(count)):
            return base
    raise RuntimeError("no run of free ports found")


def _kiln_verify() -> str:
    beside = Path(sys.executable).parent / "kiln-verify"
    if beside.exists():
        return str(beside)
    found = shutil.which("kiln-verify")
    if found is None:
        pytest.skip("the kiln-verify console script is not installed")
    return found


def _clean_environ(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KILN_OPENENV_INTEROP_", "OPENENV_INTEROP_", "PYTEST_"))
    }
    env["PYTHON"] = sys.executable
    env.update(extra)
    return env


def run_gate(
    *args: str, count: int = FULL_INVENTORY, timeout: float = 540, **extra: str
) -> tuple[subprocess.CompletedProcess[str], list[tuple[str, int, int]]]:
    base = free_base_port(count)
    env = _clean_environ(KILN_OPENENV_INTEROP_PORT=str(base), **extra)
    result = subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    started = [(name, int(pid), int(port)) for name, pid, port in STARTED.findall(result.stdout)]
    return result, started


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            return stat.read_text().split(") ", 1)[1][:1] != "Z"
        except (OSError, IndexError):
            return False
    return True


def assert_all_stopped(started: list[tuple[str, int, int]]) -> None:
    """No server process outlives the script and no port still listens."""
    deadline = time.monotonic() + 5
    while any(_alive(pid) for _, pid, _ in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [(name, pid) for name, pid, _ in started if _alive(pid)]
    assert survivors == [], f"server processes survived the gate: {survivors}"
    busy = [port for _, _, port in started if _listening(port)]
    assert busy == [], f"ports still listening after the gate: {busy}"


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stdout + "\n" + result.stderr)[-8000:]


# -- our own inventory: the whole gate ----------------------------------------------------------


@pytest.mark.timeout(600)
def test_gate_runs_the_interop_suite_against_our_oracle() -> None:
    result, started = run_gate("-q")
    assert result.returncode == 0, _output(result)
    assert [name for name, _, _ in started][:2] == ["counter", "bandit"]
    assert len(started) == FULL_INVENTORY
    ports = [port for _, _, port in started]
    assert ports == list(range(ports[0], ports[0] + FULL_INVENTORY))
    assert re.search(r"\b11 passed\b", result.stdout), _output(result)
    assert "skipped" not in result.stdout.splitlines()[-1], _output(result)
    assert_all_stopped(started)


# -- the external checkout path (make database, make build, build/rel/bin/NAME) -----------------

GAMES = "bandit connect4 maze wordle"
TASKS = "dyna"
MATH = "measure algebra"
SMALL_INVENTORY = 1 + 4 + 1 + 2
#: The §14.2 checks that do not assert the pinned 22/8 server counts, plus capacity.
SMALL_SELECTION = (
    "test_counter or test_bandit or test_connect4 or test_maze or test_wordle or capacity"
)


def fake_checkout(
    root: Path,
    *,
    games: str = GAMES,
    tasks: str = TASKS,
    math: str = MATH,
    recursive: bool = False,
    broken: str | None = None,
) -> Path:
    """A stand-in oracle checkout: a Makefile whose build rules write wrapper scripts."""
    root.mkdir(parents=True, exist_ok=True)
    kiln_verify = _kiln_verify()
    if recursive:  # recursive variables appear unexpanded in `make -pn`
        variables = (
            f"GAME_LIST := {games}\nARCADE_GAMES = $(GAME_LIST)\n"
            f"ARCADE_TASKS = {tasks}\nARCADE_MATH = $(strip {math})\n"
        )
    else:
        variables = f"ARCADE_GAMES := {games}\nARCADE_TASKS := {tasks}\nARCADE_MATH := {math}\n"
    broken_rule = ""
    if broken is not None:
        broken_rule = (
            f"build/rel/bin/{broken}:\n"
            f"\t@echo 'cc: error: {broken}.c: no such file' >&2; exit 1\n\n"
        )
    makefile = (
        variables
        + "\n.PHONY: all\nall:\n\t@echo 'nothing to do'\n\n"
        + broken_rule
        + "build/rel/bin/%:\n"
        + "\tmkdir -p build/rel/bin\n"
        + "\tprintf '#!/bin/sh\\nexec %s oracle serve %s \"$$@\"\\n' "
        + f"'{kiln_verify}' '$*' > $@\n"
        + "\tchmod +x $@\n"
    )
    (root / "Makefile").write_text(makefile)
    return root


def test_gate_with_an_external_checkout_builds_and_serves_its_inventory(tmp_path: Path) -> None:
    # Recursive variables (shown unexpanded by `make -pn`) exercise the expansion fallback;
    # the interrupted-gate test below covers plain `:=` variables.
    root = fake_checkout(tmp_path / "oracle-checkout", recursive=True)
    stale = root / "build" / "rel" / "bin" / "counter"
    stale.parent.mkdir(parents=True)
    stale.write_text("#!/bin/sh\necho 'stale cached binary' >&2\nexit 3\n")
    stale.chmod(0o755)
    result, started = run_gate(
        "-q", "-k", SMALL_SELECTION, count=SMALL_INVENTORY, OPENENV_INTEROP_ROOT=str(root)
    )
    assert result.returncode == 0, _output(result)
    assert "4 games, 1 tasks, 2 math" in result.stdout
    assert [name for name, _, _ in started] == [
        "counter",
        "bandit",
        "connect4",
        "maze",
        "wordle",
        "dyna",
        "measure",
        "algebra",
    ]
    assert "stale cached binary" not in stale.read_text()  # rebuilt, never trusted
    for name, _, _ in started:
        assert (root / "build" / "rel" / "bin" / name).exists()
    assert re.search(r"\b6 passed\b", result.stdout), _output(result)
    assert_all_stopped(started)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"tasks": ""}, "ARCADE_TASKS is empty"),
        ({"math": ""}, "ARCADE_MATH is empty"),
        ({"games": "bandit connect4 maze"}, "lacks the 'wordle' server"),
        ({"games": "bandit connect4 maze wordle maze"}, "duplicate server name 'maze'"),
        ({"games": "bandit connect4 maze wordle bad.name"}, "invalid server name 'bad.name'"),
    ],
)
def test_a_bad_inventory_is_refused_before_any_build(
    tmp_path: Path, variables: dict[str, str], message: str
) -> None:
    root = fake_checkout(
        tmp_path / "oracle-checkout",
        games=variables.get("games", GAMES),
        tasks=variables.get("tasks", TASKS),
        math=variables.get("math", MATH),
    )
    result, started = run_gate(count=SMALL_INVENTORY, OPENENV_INTEROP_ROOT=str(root))
    assert result.returncode != 0
    assert message in result.stderr, _output(result)
    assert started == []
    assert not (root / "build").exists()


def test_a_failing_build_fails_the_gate_with_its_log(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "oracle-checkout", broken="maze")
    result, started = run_gate(count=SMALL_INVENTORY, OPENENV_INTEROP_ROOT=str(root))
    assert result.returncode != 0
    assert "cc: error: maze.c: no such file" in result.stderr, _output(result)
    assert "make build/rel/bin/maze failed" in result.stderr
    assert started == []


def test_a_server_that_dies_fails_the_gate_with_its_log(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "oracle-checkout")
    makefile = root / "Makefile"
    makefile.write_text(
        makefile.read_text().replace(
            ".PHONY: all",
            "build/rel/bin/connect4:\n\tmkdir -p build/rel/bin\n"
            "\tprintf '#!/bin/sh\\necho connect4 cannot start >&2\\nexit 7\\n' > $@\n"
            "\tchmod +x $@\n\n.PHONY: all",
        )
    )
    result, started = run_gate(count=SMALL_INVENTORY, OPENENV_INTEROP_ROOT=str(root))
    assert result.returncode != 0
    assert "connect4 cannot start" in result.stderr, _output(result)
    assert "server connect4 exited before answering /health" in result.stderr
    assert started  # some servers were running when it failed ...
    assert_all_stopped(started)  # ... and the trap stopped every one of them


def test_an_interrupted_gate_stops_every_server(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "oracle-checkout")
    base = free_base_port(SMALL_INVENTORY)
    env = _clean_environ(KILN_OPENENV_INTEROP_PORT=str(base), OPENENV_INTEROP_ROOT=str(root))
    process = subprocess.Popen(
        ["bash", str(SCRIPT), "-q", "-k", SMALL_SELECTION],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            if line.startswith("== interop suite"):
                process.terminate()  # TERM while the suite runs
                break
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = "".join(lines) + rest
    assert process.returncode == 143, output
    started = [(n, int(p), int(q)) for n, p, q in STARTED.findall(output)]
    assert len(started) == SMALL_INVENTORY
    assert_all_stopped(started)


def test_the_gate_suite_never_starts_the_gate() -> None:
    """The gate runs ``pytest tests/gate``: a test module there that ran the gate would
    start it again from inside itself, without end (each level a full set of 23 servers)."""
    gate = REPO / "tests" / "gate"
    offenders = [
        path.name
        for path in gate.rglob("test_*.py")
        if SCRIPT.name in path.read_text("utf-8") or "SCRIPT" in path.read_text("utf-8")
    ]
    assert offenders == []
