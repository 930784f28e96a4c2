"""The trainer's log lines as progress: what the Hugging Face trainer prints, and anything
else it may print (never an error, never a made-up number)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from kiln_verify.control.kinds.trainer_child import parse_progress
from kiln_verify.control.training.trainer_status import OpenEnvTrainingStatus


def test_the_trainers_log_dictionaries() -> None:
    assert parse_progress("{'loss': 0.0123, 'grad_norm': 1.5, 'epoch': 0.5}") == (0.5, 0.0123)
    assert parse_progress("{'loss': '-9.437e-08', 'epoch': '1'}") == (1.0, -9.437e-08)
    assert parse_progress("{'train_runtime': 3.2, 'train_loss': 0.4, 'epoch': 1.0}") == (1.0, None)
    assert parse_progress("{'loss': nan, 'epoch': 0.25}")[0] == 0.25
    assert math.isnan(parse_progress("{'loss': nan, 'epoch': 0.25}")[1] or 0.0)
    assert parse_progress("  5%|##   | 1/20 [00:01<00:19]") == (None, None)


def test_progress_moves_the_status_only_with_finite_numbers() -> None:
    start = OpenEnvTrainingStatus(job_id="grpo-1", state="running", progress=0.0)
    moved = start.advanced(epoch=0.5, loss=0.25, epochs=1.0)
    assert (moved.progress, moved.epoch, moved.current_loss) == (0.5, 0, 0.25)
    assert moved.advanced(epoch=math.nan, loss=math.inf, epochs=1.0) == moved
    assert moved.advanced(epoch=3.0, loss=None, epochs=1.0).progress == 1.0


@given(
    epoch=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    loss=st.floats(allow_nan=False, allow_infinity=False),
    quoted=st.booleans(),
)
def test_every_logged_number_reads_back_exactly(epoch: float, loss: float, quoted: bool) -> None:
    q = "'" if quoted else ""
    line = f"{{'loss': {q}{loss!r}{q}, 'learning_rate': 0.01, 'epoch': {q}{epoch!r}{q}}}"
    assert parse_progress(line) == (epoch, loss)


@given(st.text(max_size=300))
def test_any_other_line_parses_or_is_ignored(line: str) -> None:
    epoch, loss = parse_progress(line)
    assert epoch is None or isinstance(epoch, float)
    assert loss is None or isinstance(loss, float)
