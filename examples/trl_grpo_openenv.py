"""Online GRPO in TRL on an OpenEnv environment, every step recorded as a verifiable bundle.

Runs offline on a CPU in about half a minute: builds the tiny tool-calling model
(``kiln_verify.testing.tool_model``), serves the counter oracle, trains a LoRA adapter for
a few steps with TRL's ``GRPOTrainer`` through ``OpenEnvToolFactory``, records each step
with ``BatchRecorder`` and verifies every bundle it wrote: ``openenv verify`` on the three
OpenEnv files and the ``hf export-grpo`` token replay (``hf verify``'s scan) on the
recorded-GRPO corpus with the step's behaviour adapter. Prints one JSON summary.

    python examples/trl_grpo_openenv.py --output runs/demo --steps 2

The same script runs as several training processes on the CPU (gloo), one bundle per step
per rank under ``bundles/rank-RRRRR/``; rank 0 builds the model and serves the oracle,
every rank records and verifies its own steps, and rank 0 prints all of them:

    OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node 2 \
        examples/trl_grpo_openenv.py --output runs/demo2 --steps 2
    OMP_NUM_THREADS=1 accelerate launch --multi_gpu --num_processes 2 --num_machines 1 \
        --mixed_precision no --dynamo_backend no \
        examples/trl_grpo_openenv.py --output runs/demo3 --steps 2

Against your own environment, replace the oracle URL with the server's and the tiny model
with your model directory (its chat template must render tool calls; docs/trl.md).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def verify_step(bundle: Path, model_dir: Path, exports: Path) -> dict[str, object]:
    """What a reviewer runs on one step's bundle: offline verification of the OpenEnv files,
    then the recorded-GRPO export, whose token replay re-renders every completion with the
    exported tokenizer and checks it against the recorded ids, and ``hf verify``."""
    from kiln_verify.hf.export import export_grpo
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.verify import verify_hf_path
    from kiln_verify.openenv.verify import verify_bundle

    report = verify_bundle(bundle / "openenv.rollout-summary.json")
    name = bundle.name.replace("-", "_")
    exports.mkdir(parents=True, exist_ok=True)
    export = export_grpo(
        ExportSource(model=model_dir, input_adapter=bundle / "adapter"),
        dataset=bundle / "grpo.train.jsonl",
        name=name,
        output=exports / f"{name}.kiln-hf.tar.gz",
    )
    return {
        "rank": int(bundle.parent.name.removeprefix("rank-")),
        "bundle": str(bundle),
        "groups": report.groups,
        "rollouts": report.rollouts,
        "environment_exchanges": report.environment_exchanges,
        "grpo_rows_verified": verify_hf_path(export.directory).rows,
        "bytes": sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="a new directory")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    if args.output.exists():  # every rank checks before any joins the process group below
        parser.error(f"--output {args.output} already exists: give a new directory")

    from accelerate import PartialState  # type: ignore[import-untyped]
    from accelerate.utils import broadcast_object_list, gather_object  # type: ignore[import-untyped]
    from datasets import Dataset  # type: ignore[import-untyped]
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer  # type: ignore[attr-defined]

    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.testing.tool_model import build_tool_model, warm_start_tool_model
    from kiln_verify.trl import BatchRecorder, OpenEnvToolFactory
    from oracle.runner import start_server

    # one process, or one per rank under torchrun / accelerate launch: on the CPU the
    # process group is gloo's; the factory takes its rank from the launcher, the recorder
    # writes rank-RRRRR/
    state = PartialState(cpu=True)
    server = None
    if state.is_main_process:
        args.output.mkdir(parents=True)
        server = start_server("counter")  # every rank's sessions: 4 each, 64 admitted
    url = broadcast_object_list([None if server is None else server.base_url])[0]
    factory = OpenEnvToolFactory(
        url, options=CollectionOptions(group_size=2, thinking=False, max_steps=4)
    )
    try:
        tools = [factory.tool_schema()]  # what TRL shows the model; the warm start uses it
        model_dir = args.output / "model"
        with state.main_process_first():  # rank 0 builds it, the others then load it
            if state.is_main_process:
                build_tool_model(model_dir, tools)
                warm_start_tool_model(model_dir, tools, steps=200)

        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model_dir),
            args=GRPOConfig(
                output_dir=str(args.output / "trainer"),
                max_steps=args.steps,
                per_device_train_batch_size=4,
                num_generations=2,
                max_completion_length=160,
                learning_rate=1e-3,
                lr_scheduler_type="constant",
                beta=0.0,
                max_tool_calling_iterations=4,
                save_strategy="no",
                report_to="none",
                logging_steps=1,
                seed=7,
                use_cpu=True,
                disable_tqdm=True,
            ),
            train_dataset=Dataset.from_list(
                [{"prompt": [{"role": "user", "content": ""}]}]
                * (4 * args.steps * state.num_processes)
            ),
            processing_class=AutoTokenizer.from_pretrained(model_dir),
            peft_config=LoraConfig(
                r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
            ),
            environment_factory=factory,
        )
        recorder = BatchRecorder(args.output / "bundles", model_dir=model_dir, factory=factory)
        recorder.attach(trainer)
        trainer.train()
    finally:
        factory.close()

    exports = args.output / "exports" / f"rank-{factory.run.rank:05d}"
    steps = [verify_step(bundle, model_dir, exports) for bundle in recorder.published]
    steps = gather_object(steps)  # every rank's, in rank order
    state.wait_for_everyone()  # the server serves until the last rank is done
    if server is not None:
        server.stop()
        print(json.dumps({"status": "verified", "steps": steps}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
