"""The ML tests' expensive inputs, built once per test session and shared by every worker.

Many modules need the tiny Qwen3.5 model (``kiln_verify.testing.tiny_model``, a few
seconds each) and the TRL modules the warm-started tool model (half a minute); under
``pytest-xdist --dist loadfile`` those modules land on different workers, and each worker
used to build its own. Here the first process that asks builds the directory under an
exclusive file lock, in a directory every worker of the session shares (the parent of the
workers' base temporary directories; without xdist, the base directory itself), and the
others wait for it and reuse it. A directory is keyed by everything its builder reads, and
counts only once its marker beside it is written, so a build that died half way is redone,
never trusted. Building is deterministic (tests/testing/test_tiny_model.py), so a shared
model is the model each module used to build for itself.

Shared directories are read-only by convention: a test that changes a model's files copies
it first (as ``tests/hf/export/conftest.py``'s ``model_dir`` does).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: Beside each shared directory: written last, so its presence means a complete build.
_MARKER = ".complete"


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every process of this test session shares (and no other session)."""
    base = tmp_path_factory.getbasetemp()
    # pytest-xdist gives each worker <session base>/popen-gwN as its base temporary directory
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return root / "kiln-shared"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_build(
    tmp_path_factory: pytest.TempPathFactory,
    key: str,
    build: Callable[[Path], object],
    *,
    name: str = "model",
) -> Path:
    """``<shared root>/<key>/<name>``, built by ``build(path)`` by whichever process asks
    first; ``key`` must name every input ``build`` reads."""
    slot = shared_root(tmp_path_factory) / key
    slot.mkdir(parents=True, exist_ok=True)
    target = slot / name
    with _locked(slot.with_name(key + ".lock")):
        if not (slot / _MARKER).is_file():
            shutil.rmtree(target, ignore_errors=True)
            build(target)
            (slot / _MARKER).write_text("built\n", encoding="utf-8")
    return target


def digest(value: Any) -> str:
    """A short digest of a JSON value: a key part that names a builder's inputs."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tiny_model(tmp_path_factory: pytest.TempPathFactory, chat_template: str | None = None) -> Path:
    """:func:`kiln_verify.testing.tiny_model.build_tiny_model` with ``chat_template``
    (default: its ``CHAT_TEMPLATE``), in a directory named ``model``."""
    from kiln_verify.testing.tiny_model import CHAT_TEMPLATE, build_tiny_model

    template = CHAT_TEMPLATE if chat_template is None else chat_template
    return shared_build(
        tmp_path_factory,
        f"tiny-model-{digest(template)}",
        lambda path: build_tiny_model(path, template),
    )


def tool_model(
    tmp_path_factory: pytest.TempPathFactory, tools: list[dict[str, Any]], *, steps: int
) -> Path:
    """:func:`kiln_verify.testing.tool_model.build_tool_model` for ``tools``, then
    ``warm_start_tool_model`` for ``steps`` steps."""
    from kiln_verify.testing.tool_model import build_tool_model, warm_start_tool_model

    def build(path: Path) -> None:
        build_tool_model(path, tools)
        warm_start_tool_model(path, tools, steps=steps)

    return shared_build(tmp_path_factory, f"tool-model-{digest([tools, steps])}", build)


def warm_bandit_model(tmp_path_factory: pytest.TempPathFactory, bandit_url: str) -> Path:
    """The tiny model warm-started for 40 steps on a seeded random policy's valid bandit
    actions (a random tiny model never emits a valid action, so every reward would be the
    same penalty). ``bandit_url``: any oracle bandit; the oracle is deterministic, so the
    build does not depend on which one."""
    from typer.testing import CliRunner

    from kiln_verify.cli import app
    from kiln_verify.testing.tiny_model import build_tiny_model, warm_start

    def build(model: Path) -> None:
        root = model.parent
        out = CliRunner().invoke(
            app,
            ["openenv", "rollout", "--environment", bandit_url, "--policy", "random",
             "--groups", "6", "--group-size", "2", "--max-steps", "1", "--seed-start", "1000",
             "--no-thinking", "--output", str(root / "boot.rollouts.jsonl"),
             "--replay-output", str(root / "boot.replay.json"),
             "--summary-output", str(root / "boot.summary.json")],
        )  # fmt: skip
        assert out.exit_code == 0, out.output
        build_tiny_model(model)
        warm_start(model, root / "boot.rollouts.jsonl", steps=40)

    return shared_build(tmp_path_factory, "llm-server-warm-bandit-40", build)
