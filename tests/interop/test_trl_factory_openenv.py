"""The TRL environment factory against openenv 0.10.0's own server (written by others),
differentially: the same tool calls against the openenv peer and against our oracle serving
the same counter give the same tool, the same texts the model would read and the same
episode returns, including an invalid action (a recoverable protocol error), and a second
batch reset on the sessions the instances kept (every reward asked once the batch's tool
calls are done, as TRL does, so the final states are read together). The recorder's worker
re-inspects the peer with its own client and finds the identity the run inspected: a
recorded step against openenv's server is not refused as a changed environment."""

from __future__ import annotations

from typing import Any

from kiln_verify.openenv.collect.controls import CollectionOptions
from kiln_verify.trl.batch import reinspect
from kiln_verify.trl.factory import OpenEnvToolFactory
from kiln_verify.trl.run import OpenEnvRun
from kiln_verify.trl.worker import RecordingWorker

ROW: dict[str, Any] = {"prompt": [{"role": "user", "content": ""}]}


def _session(instance: Any) -> Any:
    return instance._episode._session


def _play(url: str) -> tuple[list[str], list[str], list[float]]:
    factory = OpenEnvToolFactory(
        url, options=CollectionOptions(group_size=2, thinking=False, max_steps=4)
    )
    try:
        first, second = factory(), factory()
        names = sorted(factory.tool_schema()["function"]["parameters"]["properties"])
        texts = [first.reset(**ROW), second.reset(**ROW)]
        step_a: Any = first.step  # type: ignore[attr-defined]
        step_b: Any = second.step  # type: ignore[attr-defined]
        texts += [step_a(amount=2), step_a(amount=2), step_b(amount="two"), step_b(amount=1)]
        returns = [first.get_reward(), second.get_reward()]
        held = [_session(first), _session(second)]
        # the next batch: each instance resets on the session it kept
        texts += [first.reset(**ROW), second.reset(**ROW), step_a(amount=3), step_b(amount=4)]
        returns += [first.get_reward(), second.get_reward()]
        assert [_session(first), _session(second)] == held
        return names, texts, returns
    finally:
        factory.close()


def test_the_factory_plays_openenv_s_server_as_it_plays_the_oracle(
    openenv_urls: dict[str, str], oracle_urls: dict[str, str]
) -> None:
    peer = _play(openenv_urls["counter"])
    ours = _play(oracle_urls["counter"])
    assert peer == ours
    names, texts, returns = peer
    assert "amount" in names
    assert all(texts)
    assert returns[0] != returns[1]


def test_the_recording_worker_re_inspects_openenv_s_server_unchanged(
    openenv_urls: dict[str, str],
) -> None:
    url = openenv_urls["counter"]
    run = OpenEnvRun(url, options=CollectionOptions(group_size=2, thinking=False))
    try:
        expected = (run.inspection.identity, run.inspection.environment_schema)
        worker = RecordingWorker()
        assert [worker.inspect(run.url, run.credential()).result(60) for _ in range(2)] == [
            expected,
            expected,
        ]
        assert run.loop.run(reinspect(run.client)) == expected
    finally:
        run.close()
