"""One rank of a recorded GRPO run under ``torchrun`` (tests/trl/test_multiprocess.py).

``torchrun --nproc_per_node 2 tests/trl/multiprocess_train.py URL MODEL OUTPUT``: each
process builds its factory with no ``rank`` (the launcher's), trains two optimizer steps
of 2 groups x 2 completions on the CPU through gloo, and writes ``OUTPUT/rank-R.json``:
its rank, the factory's rank, and the bundles its recorder published.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(url: str, model_dir: Path, output: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer  # type: ignore[attr-defined]

    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.trl import BatchRecorder, OpenEnvToolFactory
    from tests.trl.conftest import grpo_args, lora, prompts

    options = CollectionOptions(group_size=2, thinking=False, max_steps=4)
    factory = OpenEnvToolFactory(url, options=options)
    try:
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model_dir),
            args=grpo_args(output / "trainer", ddp_backend="gloo"),
            train_dataset=prompts(16),
            processing_class=AutoTokenizer.from_pretrained(model_dir),
            peft_config=lora(),
            environment_factory=factory,
        )
        recorder = BatchRecorder(output / "bundles", model_dir=model_dir, factory=factory)
        recorder.attach(trainer)
        trainer.train()
    finally:
        factory.close()
    rank = trainer.accelerator.process_index
    report = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "factory_rank": factory.run.rank,
        "published": [str(path) for path in recorder.wait()],
    }
    (output / f"rank-{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
