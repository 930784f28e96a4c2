"""The streamed verifier: key order of the replay, late members, error locations."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.testing.bundles import FixtureBundle, build_fixture_bundle


def _rewrite_replay(bundle: FixtureBundle, document: dict[str, Any]) -> None:
    """Write a replay document and re-seal its size and digest in the summary."""
    data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    bundle.replay.write_bytes(data)
    summary = json.loads(bundle.summary.read_text(encoding="utf-8"))
    summary["replay_sha256"] = "sha256:" + hashlib.sha256(data).hexdigest()
    summary["replay_bytes"] = len(data)
    bundle.summary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def _replay(bundle: FixtureBundle) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(bundle.replay.read_text(encoding="utf-8"))
    return value


def _failure(bundle: FixtureBundle) -> KilnError:
    with pytest.raises(KilnError) as caught:
        verify_bundle(bundle.summary)
    return caught.value


def test_replay_groups_before_the_header_still_verify(tmp_path: Path) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=4, group_size=2)
    document = _replay(bundle)
    groups = document.pop("groups")
    _rewrite_replay(bundle, {"groups": groups, **document})
    assert verify_bundle(bundle.summary).groups == 4


def test_unknown_replay_member_after_the_groups_is_refused(tmp_path: Path) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=3, group_size=2)
    _rewrite_replay(bundle, {**_replay(bundle), "zz_extra": 1})
    assert _failure(bundle).code == "record_invalid"


def test_invalid_later_group_is_located_in_the_document(tmp_path: Path) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=4, group_size=2)
    document = _replay(bundle)
    document["groups"][2]["seed"] = -1
    _rewrite_replay(bundle, document)
    error = _failure(bundle)
    assert error.code == "record_invalid"
    assert "ReplayManifest at $.groups[2].seed" in error.rule


def test_invalid_later_rollout_record_is_located_in_the_document(tmp_path: Path) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=3, group_size=2)
    summary = json.loads(bundle.summary.read_text(encoding="utf-8"))
    summary["rollouts"][3]["steps"] = "3"
    bundle.summary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    error = _failure(bundle)
    assert error.code == "record_invalid"
    assert "RolloutSummary at $.rollouts[3].steps" in error.rule


def test_duplicate_top_level_key_in_the_summary(tmp_path: Path) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=2, group_size=2)
    text = bundle.summary.read_text(encoding="utf-8")
    bundle.summary.write_text(text.replace("{", '{"groups": 2, ', 1), encoding="utf-8")
    assert _failure(bundle).code == "json_duplicate_key"
