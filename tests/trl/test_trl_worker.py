"""The recorder's corpus worker from a training script as users write them.

A script without an ``if __name__ == "__main__"`` guard is the common case; a worker
started through ``multiprocessing`` (spawn, forkserver) would import that script again in
the child and run its training a second time. The worker is ``python -m
kiln_verify.trl.worker`` instead, so the script's top level runs once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from kiln_verify.trl.identity import BaseModel
from kiln_verify.trl.worker import CorpusWorker

print("top level ran", flush=True)
worker = CorpusWorker(*BaseModel(sys.argv[1]).replay_sources())
options = {"group_size": 2, "stop_ids": frozenset(), "behavior": None, "tokenizer": {},
           "invocation": {}, "sampling": {}}
print("corpus", worker.corpus([], options).result(), flush=True)
print("worker", CorpusWorker.process().pid != 0, flush=True)
"""


def test_a_script_without_a_main_guard_runs_its_top_level_once(
    tool_model: Path, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    repo = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, str(script), str(tool_model)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": repo},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["top level ran", "corpus b''", "worker True"]
