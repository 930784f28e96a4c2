"""Where the verifier reads a bundle's files: only beneath the summary's own directory.

A summary records the names its collector wrote. Those names are peer input: they resolve
inside the summary's directory (the recorded relative name, then the summary's sibling with
the recorded file name), never against the current directory, never to an absolute path,
a ``..`` or a symlinked parent. Explicit ``--dataset``/``--replay`` overrides are the only
way to read elsewhere. Reports name the absolute paths actually opened.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.errors import PathMissing, PathSymlink
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.openenv.verify.files import resolve_bundle_path
from kiln_verify.testing.bundles import (
    DATASET,
    REPLAY,
    SUMMARY,
    FixtureBundle,
    build_fixture_bundle,
)


@pytest.fixture
def bundle(tmp_path: Path) -> FixtureBundle:
    return build_fixture_bundle(tmp_path / "bundle", groups=3, group_size=2)


@pytest.fixture
def decoy(tmp_path: Path) -> FixtureBundle:
    """Another valid bundle with the default file names, in a directory of its own."""
    return build_fixture_bundle(tmp_path / "decoy", groups=2, group_size=2)


def _record(bundle: FixtureBundle, **paths: str) -> None:
    doc = json.loads(bundle.summary.read_bytes())
    doc.update(paths)
    bundle.summary.write_bytes(dumps_pretty(doc))


def test_a_decoy_bundle_in_the_working_directory_is_never_read(
    bundle: FixtureBundle, decoy: FixtureBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's main job leaves a bundle in the working directory: it must not shadow."""
    monkeypatch.chdir(decoy.directory)
    assert Path(DATASET).is_file()
    assert Path(REPLAY).is_file()
    report = verify_bundle(bundle.summary)
    assert report.dataset_path == os.fspath(bundle.dataset)
    assert report.replay_path == os.fspath(bundle.replay)
    assert report.groups == 3


def test_the_cli_reports_the_absolute_paths_it_opened(
    bundle: FixtureBundle, decoy: FixtureBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(decoy.directory)
    relative = os.path.relpath(bundle.summary, decoy.directory)
    result = CliRunner().invoke(app, ["openenv", "verify", "--summary", relative, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for key, opened in (("summary_path", bundle.summary), ("dataset_path", bundle.dataset),
                        ("replay_path", bundle.replay)):  # fmt: skip
        assert os.path.isabs(report[key])
        assert Path(report[key]).resolve() == opened.resolve()
    assert report["dataset_path"] == os.fspath(Path(relative).absolute().parent / DATASET)


def test_an_absolute_recorded_path_is_read_as_the_summarys_sibling(
    bundle: FixtureBundle, decoy: FixtureBundle
) -> None:
    _record(bundle, output_path=os.fspath(decoy.dataset), replay_output_path="/gone/" + REPLAY)
    report = verify_bundle(bundle.summary)
    assert report.dataset_path == os.fspath(bundle.dataset)
    assert report.replay_path == os.fspath(bundle.replay)


def test_a_recorded_subdirectory_is_read_beneath_the_summary(bundle: FixtureBundle) -> None:
    (bundle.directory / "parts").mkdir()
    moved = bundle.directory / "parts" / "corpus.jsonl"
    bundle.dataset.rename(moved)
    _record(bundle, output_path="parts/corpus.jsonl")
    assert verify_bundle(bundle.summary).dataset_path == os.fspath(moved)


def test_a_recorded_name_never_leaves_the_directory(bundle: FixtureBundle, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    bundle.dataset.rename(outside)
    for recorded in ("../outside.jsonl", os.fspath(outside), "./../outside.jsonl"):
        _record(bundle, output_path=recorded)
        with pytest.raises(PathMissing) as caught:
            verify_bundle(bundle.summary)
        assert caught.value.path is not None
        assert Path(caught.value.path).parent == bundle.directory
        # the outside file's size never reaches a message
        assert str(outside.stat().st_size) not in str(caught.value)


def test_a_symlinked_parent_is_refused(bundle: FixtureBundle, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bundle.dataset.rename(elsewhere / DATASET)
    (bundle.directory / "parts").symlink_to(elsewhere)
    _record(bundle, output_path="parts/" + DATASET)
    with pytest.raises(PathSymlink) as caught:
        verify_bundle(bundle.summary)
    assert caught.value.path == os.fspath(bundle.directory / "parts")


def test_overrides_are_relative_to_the_working_directory(
    bundle: FixtureBundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.move(bundle.dataset, moved / "c.jsonl")
    monkeypatch.chdir(moved)
    with pytest.raises(PathMissing):
        verify_bundle(bundle.summary)
    report = verify_bundle(bundle.summary, dataset_path="c.jsonl")
    assert report.dataset_path == os.fspath(moved / "c.jsonl")


_NAME = st.text(st.sampled_from("ab./\\"), max_size=12)


@settings(max_examples=300, deadline=None)
@given(recorded=st.one_of(_NAME, st.builds("/".join, st.lists(_NAME, max_size=4))))
def test_every_recorded_name_resolves_inside_the_summary_directory(recorded: str) -> None:
    """Property: whatever the summary records, the path read is beneath its directory."""
    root = Path("/nonexistent-kiln-root/bundle")
    summary = root / SUMMARY
    try:
        resolved = resolve_bundle_path(None, recorded, summary)
    except PathMissing as exc:
        resolved = Path(exc.path or "")
    assert resolved.is_absolute()
    assert ".." not in resolved.parts
    assert resolved == root or root in resolved.parents
