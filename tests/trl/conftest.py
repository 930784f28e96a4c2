"""Shared pieces of the TRL tests: the tiny tool-calling model (built and warm-started once
per session), a counter whose odd seeds refuse the first step (a recoverable protocol
error, deterministically), and the trainer configuration every test uses."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.openenv.collect.controls import CollectionOptions
from kiln_verify.trl.factory import OpenEnvToolFactory
from oracle.base import ExecutionError, Outcome, ResetRequest
from oracle.envs.counter import CounterEnvironment
from pytest_kiln.fixtures import OracleFactory
from tests import models


class FlakyCounter(CounterEnvironment):
    """The counter, except that the first step of an odd-seeded episode is refused with a
    recoverable ``EXECUTION_ERROR`` (the episode goes on)."""

    def __init__(self) -> None:
        super().__init__()
        self._flaky = False

    def _reset(self, request: ResetRequest) -> Outcome:
        self._flaky = request.seed % 2 == 1
        return super()._reset(request)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if self._flaky:
            self._flaky = False
            raise ExecutionError("the first step of an odd seed is refused")
        return super()._step(action)


COUNTER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "step",
        "description": (
            "Adds each step's amount to a running total; reward is the total as a float; "
            "done once the total reaches 4 or after 16 steps."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "integer", "description": "Added to the running total."},
                "metadata": {
                    "type": "object",
                    "nullable": True,
                    "description": "Additional metadata for the action",
                },
                "note": {
                    "type": "string",
                    "nullable": True,
                    "description": "Free text, echoed back as last_note.",
                },
            },
            "required": ["amount"],
        },
        "return": {"type": "string", "description": "The environment's answer to the action."},
    },
}
"""The counter's action tool as the factory derives it (pinned by test_inputs)."""


@pytest.fixture(scope="session")
def tool_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("trl")
    return models.tool_model(tmp_path_factory, [COUNTER_TOOL], steps=200)


def grpo_args(output_dir: Path, **overrides: Any) -> Any:
    """Two optimizer steps of 4 completions (2 groups of 2) on CPU, float32, no KL."""
    from trl import GRPOConfig  # type: ignore[attr-defined]

    fields: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "num_generations": 2,
        "max_completion_length": 160,
        "learning_rate": 1e-3,
        "lr_scheduler_type": "constant",
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "seed": 7,
        "use_cpu": True,
        "bf16": False,
        "beta": 0.0,
        "max_tool_calling_iterations": 4,
        "disable_tqdm": True,
    }
    fields.update(overrides)
    return GRPOConfig(**fields)


def lora() -> Any:
    from peft import LoraConfig

    return LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")


def prompts(count: int) -> Any:
    from datasets import Dataset  # type: ignore[import-untyped]

    return Dataset.from_list([{"prompt": [{"role": "user", "content": ""}]}] * count)


@pytest.fixture
def counter_factory(start: OracleFactory) -> Iterator[OpenEnvToolFactory]:
    """A factory (groups of 2, no thinking, 1 s capacity wait) on a fresh counter oracle."""
    options = CollectionOptions(group_size=2, thinking=False, capacity_wait_seconds=1)
    factory = OpenEnvToolFactory(start("counter").base_url, options=options)
    yield factory
    factory.close()
