"""Fixtures for the reference-runner tests: a fake base model and a runner invocation helper."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.hf.runner.train import PINNED_PACKAGES

from .kit import fake_site, make_bundle, make_fake_model


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def status(self) -> dict[str, Any]:
        lines = self.stdout.strip().splitlines()
        assert len(lines) == 1, self.stdout
        value = json.loads(lines[0])
        assert isinstance(value, dict)
        return value

    @property
    def imported(self) -> set[str]:
        """Top-level module names imported (from ``-X importtime`` output)."""
        names = set()
        for line in self.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
        return names


Runner = Callable[..., Run]


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return make_fake_model(tmp_path / "hf-model")


@pytest.fixture
def bundle(tmp_path: Path, model_dir: Path) -> Path:
    root = tmp_path / "run_01.kiln-hf"
    make_bundle(root, model_dir)
    return root


@pytest.fixture
def pinned_site(tmp_path: Path) -> Path:
    return fake_site(tmp_path / "site-pinned", PINNED_PACKAGES)


@pytest.fixture
def run_runner(model_dir: Path) -> Runner:
    """Run a bundle's train.py as a subprocess.

    ``site=None`` runs ``python -I`` with this venv (the real environment); a ``site`` path
    runs ``python -S -E`` with only that directory's dist-info metadata on ``sys.path`` (a
    stdlib-only interpreter plus fake package versions); ``site=False`` runs stdlib only.
    """

    def run(
        bundle_dir: Path,
        *extra: str,
        site: Path | bool | None = None,
        script: Path | None = None,
        env: dict[str, str] | None = None,
        model: Path | None = None,
    ) -> Run:
        target = script if script is not None else bundle_dir / "train.py"
        base_env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE",)}
        base_env.update(env or {})
        flags = ["-I"] if site is None else ["-S", "-I"]
        args = [
            str(target),
            str(bundle_dir),
            "--base-model",
            str(model if model is not None else model_dir),
            *extra,
        ]
        cmd = [sys.executable, *flags, "-X", "importtime", *args]
        if isinstance(site, Path):
            # -I drops PYTHONPATH, so put the fake site on sys.path through a tiny bootstrap.
            boot = (
                "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv = sys.argv[1:]; "
                "runpy.run_path(sys.argv[0], run_name='__main__')"
            )
            cmd = [sys.executable, *flags, "-X", "importtime", "-c", boot, str(site), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=base_env, timeout=120)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    return run
