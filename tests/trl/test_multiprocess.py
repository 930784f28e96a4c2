"""The factory, the rollout_func and the recorder under ``torchrun --nproc_per_node 2``
on the CPU (gloo).

One two-rank launch (tests/trl/multiprocess_train.py: in each process, two optimizer steps
of 2 groups x 2 completions through the factory, then two through the rollout_func; the
tiny tool-calling model, one counter oracle both ranks share, no ``rank`` passed: the
factory takes ``RANK``, the rollout_func, built once the process group exists,
``torch.distributed``'s) feeds the checks: each rank publishes its own bundles under its
own ``rank-RRRRR`` directory, the ranks' seeds never overlap, every bundle passes
``openenv verify``, its recorded-GRPO corpus passes ``hf verify``'s token replay, and each
rank's corpus rewards are its own episodes' (its slice of TRL's gathered reward matrix).
The rank refusals need no launcher: a ``RANK`` in the environment is what torchrun sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import TrlBatchAmbiguous, UsageError
from kiln_verify.limits import TRL_RANK_SEED_STRIDE

pytestmark = pytest.mark.slow
pytest.importorskip("trl")
pytest.importorskip("peft")

SCRIPT = Path(__file__).with_name("multiprocess_train.py")
ROOT = Path(__file__).resolve().parents[2]
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR")


@pytest.fixture(scope="module")
def counter_url() -> Iterator[str]:
    """One counter oracle for the module, admitting both ranks' 4 sessions."""
    from oracle.runner import ServerConfig, start_server

    server = start_server(ServerConfig("counter", max_sessions=16))
    try:
        yield server.base_url
    finally:
        server.stop()


PATHS = ("factory", "rollout")


class TwoRanks:
    def __init__(self, model: Path, reports: list[dict[str, Any]]) -> None:
        self.model, self.reports = model, reports

    def bundles(self, path: str) -> list[Path]:
        return [Path(bundle) for report in self.reports for bundle in report[path]]


@pytest.fixture(scope="module")
def two_ranks(
    tool_model: Path, counter_url: str, tmp_path_factory: pytest.TempPathFactory
) -> TwoRanks:
    out = tmp_path_factory.mktemp("two-ranks")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",  # a free rendezvous port of its own choosing
            "--nproc_per_node",
            "2",
            str(SCRIPT),
            counter_url,
            str(tool_model),
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    reports = [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    return TwoRanks(tool_model, reports)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("path", PATHS)
def test_every_rank_publishes_its_own_bundles_with_the_launcher_s_rank(
    two_ranks: TwoRanks, path: str
) -> None:
    for rank, report in enumerate(two_ranks.reports):
        assert (report["rank"], report["world"], report["ranks"]) == (rank, 2, [rank, rank])
        bundles = [Path(bundle) for bundle in report[path]]
        assert [(b.parent.name, b.name) for b in bundles] == [
            (f"rank-{rank:05d}", "step-000001"),
            (f"rank-{rank:05d}", "step-000002"),
        ]
    assert len({b.parent.parent for b in two_ranks.bundles(path)}) == 1  # one shared OUTPUT
    # DDP keeps the adapters equal: a step's behaviour adapter is the same on both ranks
    for step in ("step-000001", "step-000002"):
        adapters = {
            (b / "adapter" / "adapter_model.safetensors").read_bytes()
            for b in two_ranks.bundles(path)
            if b.name == step
        }
        assert len(adapters) == 1


@pytest.mark.parametrize("path", PATHS)
def test_the_ranks_seeds_never_overlap(two_ranks: TwoRanks, path: str) -> None:
    """Environment seeds by the seed rule; the corpus's provenance seeds are those on the
    factory path and the collector's per-completion sampling seeds on the rollout path:
    disjoint across ranks either way."""
    seeds: dict[int, set[int]] = {0: set(), 1: set()}
    sampling: dict[int, set[int]] = {0: set(), 1: set()}
    for rank, report in enumerate(two_ranks.reports):
        base = rank * TRL_RANK_SEED_STRIDE
        for step, name in enumerate(report[path]):
            bundle = Path(name)
            summary = json.loads((bundle / "openenv.rollout-summary.json").read_text())
            assert summary["seed_start"] == base + 2 * step  # 2 groups a step, counting on
            for row in _rows(bundle / "openenv.rollouts.jsonl"):
                seeds[rank].update(c["openenv"]["seed"] for c in row["completions"])
            for row in _rows(bundle / "grpo.train.jsonl"):
                sampling[rank].update(c["provenance"]["seed"] for c in row["completions"])
        assert seeds[rank] == {base, base + 1, base + 2, base + 3}
        if path == "factory":
            assert sampling[rank] == seeds[rank]
    assert not seeds[0] & seeds[1]
    assert not sampling[0] & sampling[1]


@pytest.mark.parametrize("path", PATHS)
def test_every_bundle_verifies_and_its_corpus_replays(two_ranks: TwoRanks, path: str) -> None:
    from kiln_verify.hf.manifest import GrpoGroup
    from kiln_verify.openenv.verify import verify_bundle
    from kiln_verify.trl.identity import BaseModel

    rerender = BaseModel(two_ranks.model).rerender()
    bundles = two_ranks.bundles(path)
    assert len(bundles) == 4
    for bundle in bundles:
        report = verify_bundle(bundle / "openenv.rollout-summary.json")
        assert (report.groups, report.rollouts) == (2, 4)
        corpus = _rows(bundle / "grpo.train.jsonl")
        episodes = _rows(bundle / "openenv.rollouts.jsonl")
        assert len(corpus) == len(episodes) == 2
        for row, episode in zip(corpus, episodes, strict=True):
            rerender.check_group(GrpoGroup.model_validate(row))  # hf verify's token replay
            # this rank's slice of TRL's gathered rewards: its own episodes' returns
            assert [c["reward"] for c in row["completions"]] == [
                c["openenv"]["episode_return"] for c in episode["completions"]
            ]


def test_the_first_bundle_of_rank_one_exports_and_passes_hf_verify(
    two_ranks: TwoRanks, tmp_path: Path
) -> None:
    from kiln_verify.hf.export import export_grpo
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.verify import verify_hf_path

    bundle = Path(two_ranks.reports[1]["factory"][0])
    outcome = export_grpo(
        ExportSource(model=two_ranks.model, input_adapter=bundle / "adapter"),
        dataset=bundle / "grpo.train.jsonl",
        name="rank1_step1",
        output=tmp_path / "rank1_step1.kiln-hf.tar.gz",
    )
    assert verify_hf_path(outcome.directory).rows == 2


@pytest.mark.parametrize("kind", ["factory", "rollout"])
def test_a_rank_other_than_the_launcher_s_is_refused_before_connecting(
    kind: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.trl import OpenEnvRolloutFunc, OpenEnvToolFactory

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    url = "http://127.0.0.1:9"  # nothing listens: contacting it would fail otherwise
    options = CollectionOptions(group_size=2, thinking=False)
    build: dict[str, Any] = {
        "factory": lambda: OpenEnvToolFactory(url, options=options, rank=0),
        "rollout": lambda: OpenEnvRolloutFunc(
            url, model_dir=str(tmp_path), options=options, rank=0
        ),
    }
    with pytest.raises(TrlBatchAmbiguous) as raised:
        build[kind]()
    assert raised.value.code == "trl_batch_ambiguous"
    assert "rank=0 was passed, but the launcher runs this process as rank 1" in str(raised.value)


@pytest.mark.parametrize(
    ("rank", "world", "rule"),
    [
        ("x", "2", "RANK must be a non-negative integer"),
        ("-1", "2", "RANK must be a non-negative integer"),
        ("2", "2", "RANK 2 is not below its WORLD_SIZE 2"),
        ("0", "two", "WORLD_SIZE must be a non-negative integer"),
    ],
)
def test_a_launcher_rank_that_is_not_a_rank_is_refused(
    rank: str, world: str, rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.trl import OpenEnvToolFactory

    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world)
    options = CollectionOptions(group_size=2, thinking=False)
    with pytest.raises(UsageError, match=rule):
        OpenEnvToolFactory("http://127.0.0.1:9", options=options)


def test_the_launcher_s_rank_is_the_default_and_a_matching_rank_is_accepted(
    counter_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kiln_verify.openenv.collect.controls import CollectionOptions
    from kiln_verify.trl import OpenEnvToolFactory

    options = CollectionOptions(group_size=2, thinking=False, seed_start=5)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in (None, 1):
        factory = OpenEnvToolFactory(counter_url, options=options, rank=rank)
        try:
            assert factory.run.rank == 1
            assert factory.run.seed_base == 5 + TRL_RANK_SEED_STRIDE
        finally:
            factory.close()
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    factory = OpenEnvToolFactory(counter_url, options=options)
    try:
        assert (factory.run.rank, factory.run.seed_base) == (0, 5)  # no launcher: rank 0
    finally:
        factory.close()
