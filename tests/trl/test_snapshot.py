"""The adapter reader (kiln_verify.trl.snapshot): after its first snapshot (PEFT's own) it
serializes the live adapter itself, and every snapshot must equal PEFT's ``save_pretrained``
of the same model byte for byte, whatever the updates in between; a changed configuration
or a replaced module goes back to PEFT, and a layout it cannot map never leaves PEFT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.trl.identity import adapter_snapshot
from kiln_verify.trl.snapshot import AdapterReader

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def peft_model(tool_model: Path) -> Any:
    from kiln_verify.testing.lora import random_lora_model

    return random_lora_model(tool_model, seed=5, rank=2)


def _lora(model: Any) -> list[Any]:
    return [p for name, p in model.named_parameters() if "lora_" in name]


def _same_as_peft(reader: AdapterReader, model: Any) -> None:
    ours, peft = reader.snapshot(model), adapter_snapshot(model)
    assert ours.weights == peft.weights
    assert ours.config == peft.config
    assert ours.content_sha256 == peft.content_sha256


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    updates=st.lists(
        st.tuples(st.integers(0, 10_000), st.floats(-4, 4, allow_nan=False)),
        min_size=1,
        max_size=4,
    )
)
def test_every_snapshot_after_the_first_is_peft_s_bytes(
    peft_model: Any, updates: list[tuple[int, float]]
) -> None:
    reader = AdapterReader()
    reader.snapshot(peft_model)
    parameters = _lora(peft_model)
    for index, scale in updates:
        with torch.no_grad():  # what an optimizer step does: in place
            parameter = parameters[index % len(parameters)]
            parameter.add_(torch.full_like(parameter, scale))
        _same_as_peft(reader, peft_model)
    assert reader.peft_snapshots == 1


def test_a_replaced_parameter_is_read_afresh(peft_model: Any) -> None:
    reader = AdapterReader()
    reader.snapshot(peft_model)
    module = peft_model.get_submodule(
        next(name for name, _ in peft_model.named_modules() if name.endswith("lora_B.default"))
    )
    module.weight = torch.nn.Parameter(torch.randn_like(module.weight))
    _same_as_peft(reader, peft_model)
    assert reader.peft_snapshots == 1


def test_a_changed_configuration_goes_back_to_peft_and_learns_again(peft_model: Any) -> None:
    reader = AdapterReader()
    reader.snapshot(peft_model)
    config = peft_model.peft_config["default"]
    saved = config.lora_alpha
    try:
        config.lora_alpha = saved + 4  # the config file changes
        _same_as_peft(reader, peft_model)
        assert reader.peft_snapshots == 2
        _same_as_peft(reader, peft_model)
        assert reader.peft_snapshots == 2
    finally:
        config.lora_alpha = saved


def test_a_replaced_module_goes_back_to_peft(peft_model: Any) -> None:
    reader = AdapterReader()
    reader.snapshot(peft_model)
    path = next(name for name, _ in peft_model.named_modules() if name.endswith("lora_A"))
    holder = peft_model.get_submodule(path)
    saved = holder["default"]
    try:
        replacement = torch.nn.Linear(saved.in_features, saved.out_features, bias=False)
        holder["default"] = replacement
        _same_as_peft(reader, peft_model)
        assert reader.peft_snapshots == 2
    finally:
        holder["default"] = saved


def test_a_layout_it_cannot_map_stays_with_peft(
    peft_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tensors PEFT saves that are copies, not the live parameters, give nothing to read
    later: every snapshot stays PEFT's own."""
    import peft

    real = peft.get_peft_model_state_dict
    monkeypatch.setattr(
        peft,
        "get_peft_model_state_dict",
        lambda model, **kw: {k: v.clone() for k, v in real(model, **kw).items()},
    )
    reader = AdapterReader()
    for _ in range(3):
        _same_as_peft(reader, peft_model)
    assert reader.peft_snapshots == 3
