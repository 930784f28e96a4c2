"""Behaviour log-probabilities taken from TRL's training forward (kiln_verify.trl.logprobs).

The row mapping goes through TRL's own ``shuffle_sequence_dict`` and ``split_tensor_dict``
(what ``GRPOTrainer._prepare_inputs`` does to a generation batch), over generated
permutations and micro-batch counts. The loss and forward here are stand-ins: a loss that
skips the per-token forward, or scores a row twice, is an error path TRL's own trainer
does not produce, and the recorder must fail the micro-batch before its backward pass.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.errors import TrlRecordingFailed
from kiln_verify.trl.batch import CapturedBatch
from kiln_verify.trl.identity import AdapterSnapshot
from kiln_verify.trl.logprobs import ROW_KEY, TrainingForward, active_dropout

torch = pytest.importorskip("torch")
trl_utils = pytest.importorskip("trl.trainer.utils")


class Trainer:
    """The two methods TrainingForward wraps: the loss calls the per-token forward once on
    the policy (``scores``: how many times), whose log-probabilities encode the tokens."""

    def __init__(self, scores: int = 1) -> None:
        self.policy = object()
        self.scores = scores

    def _get_per_token_logps_and_entropies(self, model: Any, ids: Any, *args: Any) -> Any:
        return -ids.float() / 1024.0, None, None  # exact in float32

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
        for _ in range(self.scores):
            self._get_per_token_logps_and_entropies(model, inputs["completion_ids"])
        self._get_per_token_logps_and_entropies(object(), inputs["completion_ids"])  # a ref
        return torch.tensor(0.0)


def _batch(lengths: list[int]) -> tuple[CapturedBatch, dict[str, Any]]:
    batch = CapturedBatch(1, AdapterSnapshot(b"{}", b""))
    batch.completion_ids = [[100 * row + i for i in range(n)] for row, n in enumerate(lengths)]
    width = max(lengths)
    padded = [ids + [0] * (width - len(ids)) for ids in batch.completion_ids]
    return batch, {"completion_ids": torch.tensor(padded), "advantages": torch.zeros(len(lengths))}


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=8),
    chunks=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16),
)
def test_each_row_gets_its_own_values_through_trl_s_shuffle_and_split(
    lengths: list[int], chunks: int, seed: int
) -> None:
    if len(lengths) % chunks:
        lengths = lengths + [1] * (chunks - len(lengths) % chunks)
    batch, output = _batch(lengths)
    trainer = Trainer()
    TrainingForward(trainer, batch.trained)
    batch.scored(output)
    assert output[ROW_KEY].tolist() == list(range(len(lengths)))
    torch.manual_seed(seed)
    shuffled = trl_utils.shuffle_sequence_dict(output)
    for micro in trl_utils.split_tensor_dict(shuffled, chunks):
        trainer._compute_loss(trainer.policy, micro)
    expected = [[-t / 1024.0 for t in ids] for ids in batch.completion_ids]
    assert batch.behaviour_logprobs() == expected


def test_sampler_log_probabilities_are_kept_and_become_trl_s_pi_old() -> None:
    batch, output = _batch([2, 1])
    sampled = torch.tensor([[-0.5, -0.25], [-1.0, 0.0]])
    output["sampling_per_token_logps"] = sampled
    batch.scored(output)
    assert ROW_KEY not in output
    assert torch.equal(output["old_per_token_logps"], sampled)
    assert batch.behaviour_logprobs() == [[-0.5, -0.25], [-1.0]]


@pytest.mark.parametrize(
    ("scores", "rule"),
    [
        (0, "without its per-token forward"),
        (2, None),  # the second call is not the recorder's: one capture per micro-batch
    ],
)
def test_a_loss_that_skips_the_forward_fails_before_backward(scores: int, rule: str | None) -> None:
    batch, output = _batch([1, 1])
    trainer = Trainer(scores)
    TrainingForward(trainer, batch.trained)
    batch.scored(output)
    if rule is None:
        trainer._compute_loss(trainer.policy, output)
        assert batch.behaviour_logprobs() == [[0.0], [-100 / 1024]]
        return
    with pytest.raises(TrlRecordingFailed, match=rule) as raised:
        trainer._compute_loss(trainer.policy, output)
    assert raised.value.code == "trl_recording_failed"


def test_a_row_scored_twice_or_never_fails_the_recording() -> None:
    batch, output = _batch([1, 1])
    trainer = Trainer()
    TrainingForward(trainer, batch.trained)
    batch.scored(output)
    with pytest.raises(TrlRecordingFailed, match=r"scored 0 of the batch's 2 rows"):
        batch.behaviour_logprobs()
    first = {key: value[:1] for key, value in output.items()}
    trainer._compute_loss(trainer.policy, first)
    with pytest.raises(TrlRecordingFailed, match=r"scored 1 of the batch's 2 rows"):
        batch.behaviour_logprobs()
    with pytest.raises(TrlRecordingFailed, match="scored row 0 of the batch twice"):
        trainer._compute_loss(trainer.policy, first)


def test_micro_batches_without_the_row_key_are_not_recorded() -> None:
    """Unrecorded steps (``every``) and evaluation batches carry no row index."""
    seen: list[Any] = []
    trainer = Trainer()
    TrainingForward(trainer, lambda rows, logps: seen.append(rows))
    trainer._compute_loss(trainer.policy, {"completion_ids": torch.tensor([[1]])})
    assert seen == []


def test_a_trainer_without_the_hooks_is_refused() -> None:
    with pytest.raises(TrlRecordingFailed, match=r"no GRPOTrainer\._compute_loss"):
        TrainingForward(SimpleNamespace(), lambda rows, logps: None)


def test_lora_dropout_is_found_in_a_real_peft_model(tool_model: Any) -> None:
    """PEFT's LoRA dropout is a dropout module inside each adapted layer; p=0 is none."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    def wrapped(rate: float) -> Any:
        config = LoraConfig(r=2, target_modules=["q_proj"], lora_dropout=rate)
        return get_peft_model(AutoModelForCausalLM.from_pretrained(tool_model), config)

    found = active_dropout(wrapped(0.05))
    assert found is not None
    assert found.startswith("module base_model.model.model.layers.0.self_attn.q_proj.lora_dropout")
    assert found.endswith("(p=0.05)")
    assert active_dropout(wrapped(0.0)) is None
