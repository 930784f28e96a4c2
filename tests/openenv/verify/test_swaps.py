"""One open, one truth in offline verification and live replay (issue 14.6).

Every check must read the bytes the digest covers. Swaps are timed by wrapping the opener
(no inotify): the file is replaced by another valid one, under the same name, between the
two opens, and the typed refusal is asserted.

* the replay whose header follows its groups is read twice (the header members come from a
  second read, which is hashed and must match ``replay_sha256``);
* live replay reads the replay manifest once more after offline verification, in one read
  whose digest must be the verified one, before any environment is contacted.

(The summary's second pass has its own tests: ``test_summary_pass.py``.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.errors import KilnError
from kiln_verify.openenv.replay import engine as replay_engine
from kiln_verify.openenv.verify import streams, verify_bundle, verify_bundle_digests
from kiln_verify.openenv.verify.files import open_hashed
from kiln_verify.testing.bundles import FixtureBundle, build_fixture_bundle


def _header_last(bundle: FixtureBundle) -> None:
    """Rewrite the replay with ``groups`` first (the late-header layout), rebinding the
    summary's digest."""
    doc = json.loads(bundle.replay.read_bytes())
    reordered = {"groups": doc.pop("groups"), **doc}
    data = dumps_pretty(reordered)
    bundle.replay.write_bytes(data)
    summary = json.loads(bundle.summary.read_bytes())
    summary["replay_sha256"], summary["replay_bytes"] = str(sha256_bytes(data)), len(data)
    bundle.summary.write_bytes(dumps_pretty(summary))


def _other_valid_replay(bundle: FixtureBundle) -> bytes:
    """The same replay with another environment description: a valid header that names
    other data (the swap an attacker would time)."""
    doc = json.loads(bundle.replay.read_bytes())
    doc["environments"][0]["identity"]["metadata"]["description"] = "Swapped."
    return dumps_pretty({"groups": doc.pop("groups"), **doc})


def _replace(path: Path, data: bytes) -> None:
    swap = path.with_name(path.name + ".swap")
    swap.write_bytes(data)
    os.replace(swap, path)


def test_late_header_swapped_between_the_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=3, group_size=2)
    _header_last(bundle)
    verify_bundle(bundle.summary)  # the late-header layout verifies
    swapped = _other_valid_replay(bundle)
    original = open_hashed
    opens: list[int] = []

    def opener(path: Any, **kwargs: Any) -> Any:
        if Path(path) == bundle.replay:
            opens.append(1)
            if len(opens) == 2:  # the late header's second read
                _replace(bundle.replay, swapped)
        return original(path, **kwargs)

    monkeypatch.setattr(streams, "open_hashed", opener)
    with pytest.raises(KilnError) as caught:
        verify_bundle(bundle.summary)
    assert len(opens) == 2
    assert caught.value.code == "bundle_replay_digest_mismatch"


def test_live_replay_rereads_only_the_verified_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=3, group_size=2)
    original = verify_bundle
    contacted: list[Any] = []

    def verify_then_swap(*args: Any, **kwargs: Any) -> Any:
        report = original(*args, **kwargs)
        _replace(bundle.replay, _other_valid_replay(bundle))
        return report

    async def never(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover - must not run
        contacted.append(args)
        raise AssertionError("an environment was contacted")

    monkeypatch.setattr(replay_engine, "verify_bundle", verify_then_swap)
    monkeypatch.setattr(replay_engine, "replay_manifest", never)
    with pytest.raises(KilnError) as caught:
        replay_engine.replay_bundle(bundle.summary)
    assert caught.value.code == "bundle_replay_digest_mismatch"
    assert contacted == []


def test_evaluation_reads_back_only_the_verified_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evaluate` reads each summary again after verifying it; a summary swapped for one
    with the same file digests but other claims (here its adapter label) is refused."""
    from kiln_verify.openenv.evaluate import engine as evaluate_engine

    bundle = build_fixture_bundle(tmp_path, groups=3, group_size=2)
    evaluate_engine.load_bundle(bundle.summary)
    doc = json.loads(bundle.summary.read_bytes())
    doc["adapter_label"] = "swapped"
    original = verify_bundle_digests

    def verify_then_swap(*args: Any, **kwargs: Any) -> Any:
        verified = original(*args, **kwargs)
        _replace(bundle.summary, dumps_pretty(doc))
        return verified

    monkeypatch.setattr(evaluate_engine, "verify_bundle_digests", verify_then_swap)
    with pytest.raises(KilnError) as caught:
        evaluate_engine.load_bundle(bundle.summary)
    assert caught.value.code == "evaluation_pairing_mismatch"
