"""Bad input to kiln_verify.trl, each a typed refusal: an action schema no tool signature can
express (also at factory construction), a row that sets reserved reset fields, a reward that
is not finite, a batch larger than the server's session capacity, and batches or trainers
whose mapping onto groups would be ambiguous. Real oracle servers over real sockets."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from kiln_verify.errors import (
    TrlActionSchemaUnsupported,
    TrlBatchAmbiguous,
    TrlBatchOverCapacity,
    TrlResetFieldReserved,
    TrlRewardNotFinite,
)
from kiln_verify.openenv.collect.controls import CollectionOptions
from kiln_verify.trl.factory import OpenEnvToolFactory
from kiln_verify.trl.signature import tool_parameters
from oracle.base import ActionField, Outcome
from oracle.envs.counter import CounterEnvironment
from pytest_kiln.fixtures import OracleFactory

from .conftest import COUNTER_TOOL

ROW: dict[str, Any] = {"prompt": [{"role": "user", "content": ""}]}
GENERATION: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": None,
    "max_completion_length": 16,
    "repetition_penalty": 1.0,
    "use_vllm": False,
    "vllm_mode": "server",
    "chat_template_kwargs": None,
    "generation_kwargs": None,
    "cache_implementation": None,
    "max_tool_calling_iterations": 4,
}
"""The GRPOConfig fields the behaviour identity binds (kiln_verify.trl.batch)."""


def _factory(url: str, **options: Any) -> OpenEnvToolFactory:
    fields: dict[str, Any] = {"group_size": 2, "thinking": False, "capacity_wait_seconds": 1}
    fields.update(options)
    return OpenEnvToolFactory(url, options=CollectionOptions(**fields))


def test_the_action_tool_is_derived_from_the_advertised_schema(
    counter_factory: OpenEnvToolFactory,
) -> None:
    pytest.importorskip("transformers")
    counter_factory()
    assert counter_factory.tool_schema() == COUNTER_TOOL
    # exactly three public methods: TRL turns each into a tool or hook
    import inspect

    names = [
        n for n, _ in inspect.getmembers(counter_factory.environment_class, inspect.isfunction)
    ]
    assert [n for n in names if not n.startswith("_")] == ["get_reward", "reset", "step"]


def _schema(prop: Any, name: str = "x") -> dict[str, Any]:
    return {"type": "object", "properties": {name: prop}}


@pytest.mark.parametrize(
    ("schema", "rule"),
    [
        ({"type": "array"}, "the root is not an object schema"),
        ({"type": "object"}, "declares no properties"),
        (_schema({"$ref": "#/$defs/a"}), "uses '$ref'"),
        (_schema({"oneOf": [{"type": "string"}, {"type": "integer"}]}), "uses 'oneOf'"),
        (_schema({"type": "object", "properties": {"a": {"type": "string"}}}), "nested objects"),
        (_schema({"type": "array", "items": {"type": "object"}}), "arrays of one scalar"),
        (_schema({"type": ["string", "integer"]}), "a type list"),
        (_schema({"description": "no type"}), "no expressible type"),
        (_schema({"type": "string"}, name="class"), "not a Python parameter name"),
        (_schema({"type": "string"}, name="_private"), "private parameter"),
    ],
)
def test_inexpressible_action_schemas_are_refused(schema: Any, rule: str) -> None:
    with pytest.raises(TrlActionSchemaUnsupported) as raised:
        tool_parameters(schema)
    assert raised.value.code == "trl_action_schema_unsupported"
    assert rule in raised.value.rule


class KeywordAction(CounterEnvironment):
    """An action property named like a Python keyword: no signature can hold it."""

    action_fields: ClassVar[tuple[ActionField, ...]] = (
        ActionField("lambda", "integer", "A keyword."),
    )


def test_the_factory_refuses_an_inexpressible_schema_at_construction(start: OracleFactory) -> None:
    url = start("counter", environment=KeywordAction).base_url
    with pytest.raises(TrlActionSchemaUnsupported, match="'lambda'"):
        _factory(url)


@pytest.mark.parametrize("field", ["seed", "episode_id"])
def test_a_row_setting_a_reserved_reset_field_is_refused(
    counter_factory: OpenEnvToolFactory, field: str
) -> None:
    instance = counter_factory()
    with pytest.raises(TrlResetFieldReserved, match=field):
        instance.reset(**ROW, reset={field: 3})


def test_candidates_of_one_group_must_come_from_one_row(
    counter_factory: OpenEnvToolFactory,
) -> None:
    first, second = counter_factory(), counter_factory()
    first.reset(**ROW)
    with pytest.raises(TrlBatchAmbiguous, match="another row"):
        second.reset(prompt=[{"role": "user", "content": "other"}])


class HugeReward(CounterEnvironment):
    """Each step pays 1.7e308: two steps overflow the episode return."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        return Outcome(outcome.observation, 1.7e308, False)


def test_a_return_that_is_not_finite_is_refused(start: OracleFactory) -> None:
    factory = _factory(start("counter", environment=HugeReward).base_url)
    try:
        instance = factory()
        instance.reset(**ROW)
        step: Any = instance.step  # type: ignore[attr-defined]
        step(amount=1)
        with pytest.raises(TrlRewardNotFinite):
            step(amount=1)
        with pytest.raises(TrlRewardNotFinite):
            instance.get_reward()
    finally:
        factory.close()


def test_a_batch_beyond_the_session_capacity_is_refused(start: OracleFactory) -> None:
    factory = _factory(start("counter", max_sessions=1).base_url)
    try:
        first, second = factory(), factory()
        first.reset(**ROW)
        with pytest.raises(TrlBatchOverCapacity) as raised:
            second.reset(**ROW)
        assert raised.value.code == "trl_batch_over_capacity"
    finally:
        factory.close()


def _model(dropout: float = 0.0, attention_dropout: float = 0.0) -> Any:
    """A PEFT-shaped module: a dropout layer, and a config with a nested text config."""
    import torch

    model: Any = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(dropout))
    text = SimpleNamespace(attention_dropout=attention_dropout, text_config=None)
    vars(model).update(
        peft_config={}, config=SimpleNamespace(attention_dropout=0.0, text_config=text)
    )
    return model


def _trainer(change: dict[str, Any], rollout_func: Any = None) -> Any:
    """The trainer attributes check_trainer reads: a recordable configuration, changed."""
    args: dict[str, Any] = {
        "num_generations": 2,
        "steps_per_generation": 1,
        "gradient_accumulation_steps": 1,
        "num_iterations": 1,
        "per_device_train_batch_size": 4,
        "mask_truncated_completions": False,
        **GENERATION,
        **change,
    }
    return SimpleNamespace(
        model=args.pop("model", None) or _model(),
        args=SimpleNamespace(**args),
        chat_template=None,
        processing_class=SimpleNamespace(chat_template="T"),
        rollout_func=rollout_func,
    )


BASE: Any = SimpleNamespace(chat_template="T")


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"num_generations": 4}, "num_generations must equal"),
        ({"steps_per_generation": 2}, "one generation batch per optimizer step"),
        ({"num_iterations": 2}, "num_iterations must be 1"),
        ({"per_device_train_batch_size": 3}, "whole groups"),
        ({"mask_truncated_completions": True}, "mask_truncated_completions"),
        ({"generation_kwargs": {"stopping": object()}}, "generation_kwargs must be JSON"),
        ({"model": object()}, "no PEFT adapter"),
        ({"model": _model(dropout=0.1)}, r"dropout is active \(module 1 \(p=0\.1\)\)"),
        ({"model": _model(attention_dropout=0.2)}, r"\(config attention_dropout=0\.2\)"),
    ],
)
def test_ambiguous_trainer_configurations_are_refused(change: dict[str, Any], rule: str) -> None:
    from kiln_verify.trl.trainer_check import check_trainer

    check_trainer(_trainer({}), 2, BASE, factory=True)
    with pytest.raises(TrlBatchAmbiguous, match=rule):
        check_trainer(_trainer(change), 2, BASE, factory=True)


def test_dropout_is_refused_only_where_the_trainer_samples() -> None:
    """vLLM and a rollout_func sample without TRL's training-mode dropout and report their
    own log-probabilities."""
    from kiln_verify.trl.trainer_check import check_trainer

    check_trainer(_trainer({"model": _model(0.1), "use_vllm": True}), 2, BASE, factory=True)
    trainer = _trainer({"model": _model(0.1, 0.1)}, rollout_func=object())
    check_trainer(trainer, 2, BASE, factory=False, rollout_temperature=1.0)


def test_a_rollout_func_sampling_at_another_temperature_is_refused() -> None:
    from kiln_verify.trl.trainer_check import check_trainer

    trainer = _trainer({"temperature": 0.7}, rollout_func=object())
    check_trainer(trainer, 2, BASE, factory=False, rollout_temperature=0.7)
    with pytest.raises(
        TrlBatchAmbiguous, match=r"samples at temperature 1\.0 but TRL scores the update at 0\.7"
    ):
        check_trainer(trainer, 2, BASE, factory=False, rollout_temperature=1.0)


def test_a_new_batch_starts_when_an_instance_plays_again(
    counter_factory: OpenEnvToolFactory,
) -> None:
    """The batch boundary does not depend on which instance TRL probed first: here the user
    called the factory before TRL did, and that instance is never reset."""
    counter_factory()  # the user's own probe, never reset
    first, second = counter_factory(), counter_factory()
    for batch in range(3):
        first.reset(**ROW)
        second.reset(**ROW)
        assert len(counter_factory.batch) == 2
        assert counter_factory.run.batch_seed_start == batch  # one group per batch
        assert [e.slot.plan.seed for e in counter_factory.batch] == [batch, batch]
