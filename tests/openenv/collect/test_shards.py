"""``--groups-range A:B`` shards and ``openenv merge``: the single-host bytes, or a refusal.

Shards of one plan, collected apart against the oracle, merge (in any order given) into
the bytes of one collection of the whole plan, and that bundle passes the offline
verifier; shards that overlap, leave a range out, come from two plans or two policies,
are unsealed or tampered are refused with their own codes and nothing is published. The
command line (in this process: ``main()``) is exercised once for ``merge`` and once for
``verify --shard``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.cli import main
from kiln_verify.errors import (
    JournalEntryTampered,
    JournalEntryTruncated,
    KilnError,
    ShardGap,
    ShardIncomplete,
    ShardMismatch,
    ShardOverlap,
)
from kiln_verify.openenv.collect.journal import SEAL, entry_name
from kiln_verify.openenv.collect.merge import merge_shards, publish_merged
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.verify import verify_bundle
from oracle.runner import ServerHandle
from tests.openenv.collect.journals import (
    NAMES,
    controls_in,
    files_of,
    forge,
    journaled,
    reference,
)

GROUPS = 7
RANGES = ((0, 3), (3, 4), (4, 7))


@pytest.fixture(scope="module")
def shards(
    servers: dict[str, ServerHandle], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, tuple[bytes, bytes, bytes]]:
    """Three shards of a two-environment plan (rotation ``g mod 2``), and the bundle of one
    collection of the whole plan (relative output names, as a user's command line)."""
    root = tmp_path_factory.mktemp("shards")
    urls = [servers["bandit"].base_url, servers["counter"].base_url]
    controls = controls_in(Path("."), urls[0], groups=GROUPS)
    controls = type(controls).create(
        urls,
        options=controls.options,
        output=NAMES[0],
        replay_output=NAMES[1],
        summary_output=NAMES[2],
    )
    for start, stop in RANGES:
        done, bundle = journaled(controls, root / f"s{start}", groups=range(start, stop))
        assert bundle is None
        assert done.groups == range(start, stop)
    other = controls_in(Path("."), urls[0], groups=GROUPS)
    # another plan (one environment) and another policy, each covering 3..3
    journaled(other, root / "plan", groups=range(3, 4))
    journaled(controls, root / "policy", groups=range(3, 4), policy=RandomPolicy(name="b"))
    return root, files_of(reference(controls))


def _run(*args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["kiln-verify", *args])
    try:
        main()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 1
    return 0


def test_shards_merge_into_the_single_host_bytes_and_verify(
    shards: tuple[Path, tuple[bytes, bytes, bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root, expected = shards
    controls, bundle = merge_shards([root / "s4", root / "s0", root / "s3"])
    assert files_of(bundle) == expected
    out = tmp_path / "merged"
    out.mkdir()
    code = _run(
        "openenv", "merge", str(root / "s0"), str(root / "s3"), str(root / "s4"),
        "--output-dir", str(out), "--json", monkeypatch=monkeypatch,
    )  # fmt: skip
    assert code == 0, capsys.readouterr()
    assert tuple((out / name).read_bytes() for name in NAMES) == expected
    report = verify_bundle(out / NAMES[2])
    assert (report.groups, report.rollouts) == (GROUPS, GROUPS * 2)
    capsys.readouterr()
    assert (
        _run("openenv", "verify", "--shard", str(root / "s3"), "--json", monkeypatch=monkeypatch)
        == 0
    )
    shown = json.loads(capsys.readouterr().out)
    assert (shown["groups_start"], shown["groups_stop"], shown["plan_groups"]) == (3, 4, GROUPS)
    for bad in ("3", "4:2", "a:b", "0:99"):
        argv = ["openenv", "rollout", "--environment", "http://127.0.0.1:1", "--groups", "7"]
        assert _run(*argv, "--journal", str(tmp_path / "j"), "--groups-range", bad,
                    monkeypatch=monkeypatch) == 2  # fmt: skip
    assert not (tmp_path / "j").exists()
    with pytest.raises(KilnError) as exists:
        publish_merged(controls, bundle, out)
    assert exists.value.code == "target_exists"


@pytest.mark.parametrize(
    ("names", "error"),
    [
        (("s0", "s3", "s3", "s4"), ShardOverlap),
        (("s0", "s4"), ShardGap),
        (("s3", "s4"), ShardGap),
        (("s0", "s3"), ShardGap),
        (("s0", "plan", "s4"), ShardMismatch),
        (("s0", "policy", "s4"), ShardMismatch),
    ],
)
def test_overlapping_missing_and_foreign_shards_are_refused(
    shards: tuple[Path, tuple[bytes, bytes, bytes]], names: tuple[str, ...], error: type[KilnError]
) -> None:
    root, _ = shards
    with pytest.raises(error):
        merge_shards([root / name for name in names])


def test_another_plan_is_named_and_an_unsealed_or_tampered_shard_refused(
    shards: tuple[Path, tuple[bytes, bytes, bytes]], tmp_path: Path
) -> None:
    root, _ = shards
    with pytest.raises(ShardMismatch) as plan:
        merge_shards([root / "s0", root / "plan", root / "s4"])
    assert plan.value.fields == ("environments", "reset_templates", "environment_identity")
    moved = tmp_path / "s3"
    moved.mkdir()
    for entry in (root / "s3").iterdir():
        (moved / entry.name).write_bytes(entry.read_bytes())

    def other_identity(header: dict[str, Any]) -> None:
        header["environment_inspections"][1]["identity"]["discovery_sha256"] = "sha256:" + "1" * 64

    forge(moved, header=other_identity)
    with pytest.raises(ShardMismatch) as identity:
        merge_shards([root / "s0", moved, root / "s4"])
    assert identity.value.fields == ("environment_identity",)
    with pytest.raises(ShardMismatch) as policy:
        merge_shards([root / "s0", root / "policy", root / "s4"])
    assert policy.value.fields == ("policy",)
    copy = tmp_path / "s0"
    copy.mkdir()
    for entry in (root / "s0").iterdir():
        (copy / entry.name).write_bytes(entry.read_bytes())
    (copy / entry_name(0)).write_bytes(b"")  # an empty (truncated) entry
    with pytest.raises(JournalEntryTruncated):
        merge_shards([copy, root / "s3", root / "s4"])
    (copy / entry_name(0)).write_bytes((root / "s0" / entry_name(0)).read_bytes())
    # the other plan's group entry in its place: its chain starts at another header
    (copy / entry_name(1)).write_bytes((root / "plan" / entry_name(3)).read_bytes())
    with pytest.raises(KilnError) as foreign:
        merge_shards([copy, root / "s3", root / "s4"])
    assert foreign.value.code == "journal_entry_tampered"
    (copy / entry_name(1)).write_bytes((root / "s0" / entry_name(1)).read_bytes())
    data = bytearray((copy / entry_name(2)).read_bytes())
    data[-30] ^= 0x04
    (copy / entry_name(2)).write_bytes(bytes(data))
    with pytest.raises(JournalEntryTampered):
        merge_shards([copy, root / "s3", root / "s4"])
    (copy / entry_name(2)).write_bytes((root / "s0" / entry_name(2)).read_bytes())
    (copy / SEAL).unlink()
    with pytest.raises(ShardIncomplete):
        merge_shards([copy, root / "s3", root / "s4"])
