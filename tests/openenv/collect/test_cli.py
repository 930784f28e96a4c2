"""`kiln-verify openenv rollout`: the default embedded run, JSON output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.openenv.records.summary import read_summary
from oracle.runner import ServerHandle

DEFAULT_FILES = ["openenv.replay.json", "openenv.rollout-summary.json", "openenv.rollouts.jsonl"]


def _files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_default_run_writes_the_three_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["openenv", "rollout"])
    assert result.exit_code == 0, result.output
    assert _files(tmp_path) == DEFAULT_FILES
    summary = read_summary((tmp_path / "openenv.rollout-summary.json").read_bytes())
    assert summary.rollout_count == 32
    assert summary.max_steps == 8
    assert summary.environments[0].identity.metadata.name == "BanditEnvironment"
    assert "capacity retries" in result.output
    again = CliRunner().invoke(app, ["openenv", "rollout"])
    assert again.exit_code == 1
    assert "target_exists" in again.output
    forced = CliRunner().invoke(app, ["openenv", "rollout", "--force", "--seed-start", "5"])
    assert forced.exit_code == 0
    assert read_summary((tmp_path / "openenv.rollout-summary.json").read_bytes()).seed_start == 5


def test_json_output_names_the_files_and_stats(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    out = tmp_path / "o"
    out.mkdir()
    args = ["openenv", "rollout", "--environment", servers["counter"].base_url, "--json"]
    args += ["--groups", "2", "--group-size", "2", "--max-steps", "2", "--no-thinking"]
    args += ["--output", str(out / "d.jsonl"), "--replay-output", str(out / "r.json")]
    args += ["--summary-output", str(out / "s.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["summary"] == str(out / "s.json")
    assert report["dataset"] == str(out / "d.jsonl")
    summary = read_summary((out / "s.json").read_bytes())
    assert report["stats"] == summary.stats.to_json()
    assert summary.thinking is False
    assert summary.rollout_count == 4
    assert _files(out) == ["d.jsonl", "r.json", "s.json"]


@pytest.mark.parametrize(
    "extra",
    [
        ["--groups", "0"],
        ["--group-size", "300"],
        ["--thinking", "maybe"],
        ["--temperature", "-1"],
        ["--output", "same.json", "--replay-output", "same.json"],
        ["--reset-options", "-", "--environment-reset-options", "-"],
        ["--policy", "nonsense"],
        ["--policy", "scripted"],
        ["--oracle", "bandit", "--environment", "http://127.0.0.1:9"],
        [
            "--environment",
            "http://127.0.0.1:9",
            "--environment",
            "http://127.0.0.1:8",
            "--groups",
            "1",
        ],
        ["--thinking-budget-tokens", "300"],
        ["--groups"],
    ],
)
def test_usage_errors_exit_2_and_write_nothing(
    extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["openenv", "rollout", *extra])
    assert result.exit_code == 2, result.output
    assert _files(tmp_path) == []


def test_collection_failure_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["openenv", "rollout", "--environment", "http://127.0.0.1:9", "--groups", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "error: environment_transport" in result.output
    assert _files(tmp_path) == []


def _bad_target(tmp_path: Path, case: str) -> tuple[str, str]:
    """An output directory the publication would refuse, and the error code."""
    if case == "missing-parent":
        return str(tmp_path / "no-such-dir"), "publish_failed"
    if case == "symlinked-parent":
        real = tmp_path / "real"
        real.mkdir()
        (tmp_path / "link").symlink_to(real)
        return str(tmp_path / "link"), "symlink_refused"
    if case == "existing":
        for folder in (tmp_path / "x", tmp_path / "x" / "baseline"):
            folder.mkdir()
            for name in DEFAULT_FILES:
                (folder / name).write_text("keep")
        return str(tmp_path / "x"), "target_exists"
    raise AssertionError(case)


_UNREACHABLE = ["--environment", "http://127.0.0.1:9", "--groups", "1", "--json"]


@pytest.mark.parametrize("case", ["missing-parent", "symlinked-parent", "existing"])
def test_rollout_checks_output_paths_before_any_network_contact(
    tmp_path: Path, case: str
) -> None:
    """Port 9 answers nothing: a check after contact would fail with environment_transport."""
    where, code = _bad_target(tmp_path, case)
    rollout = CliRunner().invoke(app, ["openenv", "rollout", *_UNREACHABLE,
        "--output", f"{where}/openenv.rollouts.jsonl",
        "--replay-output", f"{where}/openenv.replay.json",
        "--summary-output", f"{where}/openenv.rollout-summary.json"])  # fmt: skip
    assert rollout.exit_code == 1
    assert json.loads(rollout.stdout)["error"]["code"] == code, rollout.output
    if case == "existing":
        assert (tmp_path / "x" / DEFAULT_FILES[0]).read_text() == "keep"


def test_rollout_and_evaluate_refuse_an_existing_output_with_one_message(tmp_path: Path) -> None:
    where, _ = _bad_target(tmp_path, "existing")
    rollout = CliRunner().invoke(app, ["openenv", "rollout", *_UNREACHABLE,
        "--output", f"{where}/baseline/openenv.rollouts.jsonl",
        "--replay-output", f"{where}/baseline/openenv.replay.json",
        "--summary-output", f"{where}/baseline/openenv.rollout-summary.json"])  # fmt: skip
    evaluate = CliRunner().invoke(app, ["openenv", "evaluate", *_UNREACHABLE,
        "--output-dir", where, "--baseline-policy", "random",
        "--candidate-policy", "random"])  # fmt: skip
    assert json.loads(rollout.stdout)["error"] == json.loads(evaluate.stdout)["error"]
    assert json.loads(evaluate.stdout)["error"]["code"] == "target_exists"


def test_evaluate_refuses_an_output_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    evaluate = CliRunner().invoke(app, ["openenv", "evaluate", *_UNREACHABLE,
        "--output-dir", str(tmp_path / "file"), "--baseline-policy", "random",
        "--candidate-policy", "random"])  # fmt: skip
    error = json.loads(evaluate.stdout)["error"]
    assert (error["code"], error["rule"]) == (
        "publish_failed", "a parent of the output is not a directory"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


_TWO_ENVIRONMENTS_ONE_GROUP = [
    *("--environment", "http://127.0.0.1:9", "--environment", "http://127.0.0.1:8"),
    *("--groups", "1"),
]


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        (["--group-size", "300"], "--group-size must be an integer in 1..256"),
        (
            ["--output", "same.json", "--replay-output", "same.json"],
            "--output, --replay-output and --summary-output must name three distinct files",
        ),
        (
            _TWO_ENVIRONMENTS_ONE_GROUP,
            "--groups (1) must be at least the number of environments",
        ),
    ],
)
def test_engine_errors_name_the_flags_of_their_fields(
    extra: list[str], shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's error carries its contract fields; the CLI shows exactly those as flags
    (the control plane shows the same error with the field names, in backticks)."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["openenv", "rollout", *extra, "--json"])
    assert result.exit_code == 2, result.output
    assert shown in json.loads(result.output)["error"]["rule"]


def test_only_the_named_fields_become_flags() -> None:
    from kiln_verify.cli.output import flag_text

    text = "`groups` exceeds `limit` in `environments`"
    assert flag_text(text, ("groups", "environments")) == (
        "--groups exceeds `limit` in --environment"
    )
    assert flag_text(text, ()) == text
