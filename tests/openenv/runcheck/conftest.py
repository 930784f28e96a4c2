"""One train-run directory per module, built from the session's real oracle collection."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracle.runner import ServerHandle
from tests.openenv.runcheck.support import TrainRun, build_train_run
from tests.openenv.training.conftest import Collected, collected

__all__ = ["collected", "pristine", "run"]


@pytest.fixture(scope="module")
def pristine(
    collected: Collected, bandit: ServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> TrainRun:
    return build_train_run(collected, tmp_path_factory.mktemp("train-run"), bandit.base_url)


@pytest.fixture
def run(pristine: TrainRun, tmp_path: Path) -> TrainRun:
    return pristine.copy(tmp_path)
