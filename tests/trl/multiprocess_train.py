"""One rank of a recorded GRPO run under ``torchrun`` (tests/trl/test_multiprocess.py).

``torchrun --nproc_per_node 2 tests/trl/multiprocess_train.py URL MODEL OUTPUT``: each
process trains two optimizer steps of 2 groups x 2 completions on the CPU through gloo with
the factory (recorded under ``OUTPUT/factory``), then two with the rollout_func (under
``OUTPUT/rollout``), neither given a ``rank``: the factory is built before the process
group exists (``RANK``), the rollout_func after (``torch.distributed``). It writes
``OUTPUT/rank-R.json``: its rank, the factory's and rollout_func's ranks, and the bundles
each recorder published. One launch for both paths: a second would start torch again.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _trainer(model_dir: Path, output: Path, **kwargs: Any) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer  # type: ignore[attr-defined]

    from tests.trl.conftest import grpo_args, lora, prompts

    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=grpo_args(output / "trainer", ddp_backend="gloo"),
        train_dataset=prompts(16),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        peft_config=lora(),
        **kwargs,
    )


def main(url: str, model_dir: Path, output: Path) -> None:
    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.trl import BatchRecorder, OpenEnvRolloutFunc, OpenEnvToolFactory

    factory = OpenEnvToolFactory(
        url, options=CollectionOptions(group_size=2, thinking=False, max_steps=4)
    )
    try:
        trainer = _trainer(model_dir, output, environment_factory=factory)
        recorder = BatchRecorder(output / "factory", model_dir=model_dir, factory=factory)
        recorder.attach(trainer)
        trainer.train()
    finally:
        factory.close()
    options = CollectionOptions(
        group_size=2, thinking=False, max_steps=2, concurrency=1, max_action_tokens=24
    )
    rollout = OpenEnvRolloutFunc(url, model_dir=str(model_dir), options=options)
    try:
        second = _trainer(model_dir, output, rollout_func=rollout, reward_funcs=[rollout.reward])
        recorded = BatchRecorder(output / "rollout", model_dir=model_dir, rollout=rollout)
        recorded.attach(second)
        second.train()
    finally:
        rollout.close()
    rank = trainer.accelerator.process_index
    report = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "ranks": [factory.run.rank, rollout.run.rank],
        "factory": [str(path) for path in recorder.wait()],
        "rollout": [str(path) for path in recorded.wait()],
    }
    (output / f"rank-{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
