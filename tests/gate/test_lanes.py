"""Contract §14.3: the end-to-end lanes on the one-session bandit.

(a) collect with two environment entries pointing at that one bandit (so capacity waits
are certain), verify, verify a v2 relabel, then replay every exchange live;
(b) paired held-out evaluation: the candidate always pulls the best arm, the baseline the
worst, over 20 one-step groups from seed 1000.

The arm ranking is recomputed here from the seed exactly as Kiln's tests do (splitmix64
Fisher-Yates of ``[0..9]``, ``payout_rank[arm] = order[arm]``), never asked of the server.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.openenv.collect import run_collection
from kiln_verify.openenv.policy.base import PolicyRequest
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.records.evaluation import EnvironmentEvalGate
from kiln_verify.openenv.records.summary import read_summary, relabel_as_v2
from kiln_verify.openenv.verify import verify_bundle
from tests.gate.support import requires_gate
from tests.openenv.collect.options import make_controls

pytestmark = requires_gate

_MASK = (1 << 64) - 1
ARMS = 10


def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def payout_ranks(seed: int) -> list[int]:
    """``payout_rank[arm]`` for a seed: 0 is the worst arm, 9 the best."""
    order = list(range(ARMS))
    state = seed & _MASK
    for i in range(ARMS - 1, 0, -1):
        state, value = _splitmix64(state)
        j = value % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def best_arm(seed: int) -> int:
    ranks = payout_ranks(seed)
    return ranks.index(ARMS - 1)


def worst_arm(seed: int) -> int:
    ranks = payout_ranks(seed)
    return ranks.index(0)


def _outputs(directory: Path) -> dict[str, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "output": str(directory / "openenv.rollouts.jsonl"),
        "replay_output": str(directory / "openenv.replay.json"),
        "summary_output": str(directory / "openenv.rollout-summary.json"),
    }


def _saw_error_turn(request: PolicyRequest) -> bool:
    return any('"openenv_error"' in str(message.get("content", "")) for message in request.messages)


def correcting_bandit_policy(request: PolicyRequest) -> str:
    """First an out-of-range arm; once an error turn is in the prompt, arm 0."""
    return json.dumps({"arm": 0 if _saw_error_turn(request) else 99})


# -- (a) collect, verify, relabel, replay ------------------------------------------------------


def test_training_lane_collects_verifies_and_replays(bandit_url: str, tmp_path: Path) -> None:
    paths = _outputs(tmp_path / "bundle")
    controls = make_controls(
        [bandit_url, bandit_url],
        reset_templates=[{"difficulty": "hard"}, {"split": "train"}],
        groups=2,
        group_size=2,
        seed_start=71,
        max_steps=2,
        concurrency=2,
        max_action_tokens=32,
        temperature=0.0,
        thinking=False,
        protocol_error_reward=-1.0,
        max_recoverable_errors=1,
        capacity_wait_seconds=10,
        **paths,
    )
    bundle = asyncio.run(
        run_collection(controls, ScriptedPolicy(correcting_bandit_policy, name="bandit-e2e"))
    )
    summary = bundle.record
    assert summary.schema_ == "kiln.openenv-rollout-summary.v5"
    assert len(summary.rollouts) == 4
    assert summary.stats.recoverable_protocol_error_count == 4
    assert summary.stats.protocol_error_count == 0
    assert summary.stats.capacity_retry_count >= 1
    for record in summary.rollouts:
        assert record.termination == "max_steps", record
        assert record.steps == 2
        assert record.recoverable_protocol_errors == 1
        assert record.environment_name == "BanditEnvironment"

    report = verify_bundle(paths["summary_output"])
    assert (report.groups, report.rollouts, report.environment_exchanges) == (2, 4, 8)

    relabelled = tmp_path / "v2" / "openenv.rollout-summary.json"
    relabelled.parent.mkdir()
    original = read_summary(Path(paths["summary_output"]).read_bytes())
    relabelled.write_bytes(dumps_pretty(relabel_as_v2(original, "sha256:" + "e" * 64).to_json()))
    v2_report = verify_bundle(
        relabelled, dataset_path=paths["output"], replay_path=paths["replay_output"]
    )
    assert v2_report.environment_exchanges == 8

    from kiln_verify.openenv.protocol.access import EnvironmentAccess
    from kiln_verify.openenv.replay import replay_bundle

    replayed = replay_bundle(
        paths["summary_output"],
        access=EnvironmentAccess(capacity_wait_seconds=10),
    ).report
    assert replayed.rollouts == 4
    assert replayed.environment_exchanges == 8
    assert replayed.capacity_retries >= 1
    assert replayed.environment_prefix_only_rollouts == 0


# -- (b) paired held-out evaluation ----------------------------------------------------------


def test_paired_evaluation_on_the_one_session_bandit(bandit_url: str, tmp_path: Path) -> None:
    from kiln_verify.openenv.evaluate import run_evaluation

    controls = make_controls(
        [bandit_url],
        groups=20,
        group_size=1,
        seed_start=1000,
        max_steps=1,
        concurrency=1,
        thinking=False,
        max_recoverable_errors=0,
        capacity_wait_seconds=10,
        **_outputs(tmp_path / "unused"),
    )

    def baseline(request: PolicyRequest) -> str:
        return json.dumps({"arm": worst_arm(request.seed)})

    def candidate(request: PolicyRequest) -> str:
        return json.dumps({"arm": best_arm(request.seed)})

    evaluation = asyncio.run(
        run_evaluation(
            controls,
            ScriptedPolicy(baseline, name="baseline-worst-arm"),
            ScriptedPolicy(candidate, name="candidate-best-arm"),
            tmp_path / "evaluation",
            gate=EnvironmentEvalGate(min_mean_improvement=0.0),
        )
    )
    evidence = evaluation.receipt.evidence
    assert evidence.paired_groups == 20
    assert evidence.decision == "passed", evidence.reason
    assert evidence.regressed_groups == 0
    assert evidence.improved_groups >= 15
    assert evaluation.receipt.outcome == "kept"
    assert evaluation.baseline.rollouts == evaluation.candidate.rollouts == 20
