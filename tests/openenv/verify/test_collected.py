"""Bundles collected by our own collector from the embedded oracle verify (and stay valid
as a v2 relabel); a flipped byte in any file is refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.errors import KilnError
from kiln_verify.openenv.collect import run_collection
from kiln_verify.openenv.policy.base import BehaviorPolicyIdentity, PolicyRequest, PolicyResponse
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.records.summary import read_summary, relabel_as_v2
from kiln_verify.openenv.verify import verify_bundle
from oracle.runner import ServerHandle, start_servers
from tests.openenv.collect.options import make_controls


@pytest.fixture(scope="module")
def oracle_urls() -> Iterator[list[str]]:
    handles: list[ServerHandle] = start_servers(["counter", "bandit"])
    try:
        yield [handle.base_url for handle in handles]
    finally:
        for handle in handles:
            handle.stop()


@pytest.fixture
def collected(tmp_path: Path, oracle_urls: list[str]) -> Path:
    controls = make_controls(
        oracle_urls,
        groups=4,
        group_size=3,
        max_steps=4,
        output=str(tmp_path / "openenv.rollouts.jsonl"),
        replay_output=str(tmp_path / "openenv.replay.json"),
        summary_output=str(tmp_path / "openenv.rollout-summary.json"),
    )
    asyncio.run(run_collection(controls, RandomPolicy()))
    return tmp_path / "openenv.rollout-summary.json"


def test_collected_bundle_verifies(collected: Path) -> None:
    report = verify_bundle(collected)
    assert (report.groups, report.rollouts) == (4, 12)


def test_collected_bundle_relabelled_v2_verifies(collected: Path) -> None:
    summary = read_summary(collected.read_bytes())
    collected.write_bytes(dumps_pretty(relabel_as_v2(summary, "sha256:" + "e" * 64).to_json()))
    verify_bundle(collected)


@pytest.mark.parametrize("name", ["openenv.rollouts.jsonl", "openenv.replay.json"])
def test_collected_bundle_byte_flip_is_refused(collected: Path, name: str) -> None:
    path = collected.parent / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(KilnError) as caught:
        verify_bundle(collected)
    assert caught.value.code.endswith("_digest_mismatch")


class _ReasoningPolicy:
    """Candidate ``c`` answers its first step with reply ``c`` of :data:`REPLIES` (final
    content, reasoning): one of every harness kind, and one valid action."""

    REPLIES: tuple[tuple[str, str | None], ...] = (
        ("   ", "ran out of tokens while thinking"),  # MODEL_ACTION_NO_OUTPUT
        ("pull arm 3", "r"),  # INVALID_MODEL_ACTION
        ('{"arm": "three"}', None),  # ACTION_SCHEMA_VALIDATION_FAILED
        ('```json\n{"arm": 1}\n```', "fenced"),  # valid, then ...
        ("", None),  # ... no output at all on step 1
    )

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        text, reasoning = self.REPLIES[request.candidate_index]
        if request.step_index:
            text, reasoning = self.REPLIES[-1]
        return PolicyResponse(text=text, reasoning=reasoning)

    def identity(self) -> BehaviorPolicyIdentity:
        return BehaviorPolicyIdentity(kind="scripted", name="reasoning", parameters={})

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("thinking", [True, False])
def test_collected_invalid_tails_verify(
    tmp_path: Path, oracle_urls: list[str], thinking: bool
) -> None:
    """Every harness kind the collector writes, thinking on and off, is what the verifier
    re-derives from the recorded text (one rule, ``judge_model_reply``)."""
    controls = make_controls(
        oracle_urls[1:],
        groups=1,
        group_size=len(_ReasoningPolicy.REPLIES),
        max_steps=3,
        thinking=thinking,
        output=str(tmp_path / "openenv.rollouts.jsonl"),
        replay_output=str(tmp_path / "openenv.replay.json"),
        summary_output=str(tmp_path / "openenv.rollout-summary.json"),
    )
    asyncio.run(run_collection(controls, _ReasoningPolicy()))
    verify_bundle(tmp_path / "openenv.rollout-summary.json")
    line = json.loads((tmp_path / "openenv.rollouts.jsonl").read_bytes().splitlines()[0])
    tails = [c["trajectory"][-2:] for c in line["completions"]]
    codes = [json.loads(t[1]["content"])["openenv_harness_error"]["code"] for t in tails]
    assert codes == [
        "MODEL_ACTION_NO_OUTPUT",
        "INVALID_MODEL_ACTION",
        "ACTION_SCHEMA_VALIDATION_FAILED",
        "MODEL_ACTION_NO_OUTPUT",
        "MODEL_ACTION_NO_OUTPUT",
    ]
    no_output = tails[0][0]["content"]
    assert no_output == ("ran out of tokens while thinking" if thinking else "   ")
    assert tails[1][0]["content"] == ("r</think>pull arm 3" if thinking else "pull arm 3")
