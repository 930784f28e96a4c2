"""Everything the runner refuses before it runs anything: exit 2, no receipt, no run dir."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.qualification.fixture import (
    commit_all,
    make_repo,
    metric_code,
    qualify,
    run,
    step,
    workload,
)

VARIABLES = {
    "count": {"type": "integer", "description": "how many", "default": 1},
    "ratio": {"type": "number", "description": "a ratio", "default": 0.5},
    "flag": {"type": "boolean", "description": "a switch", "default": False},
    "mode": {
        "type": "string",
        "description": "a mode",
        "allowed_values": ["a", "b"],
        "default": "a",
    },
    "pinned": {"type": "string", "description": "fixed by cpu"},
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    hello = step("hello", metric_code("count", "int(__import__('sys').argv[1])"), "${count}")
    return make_repo(
        tmp_path,
        {
            "hello": workload([hello], variables=VARIABLES, cpu_vars={"pinned": "x"}),
            "plain": workload([step("noop", "pass")]),
        },
    )


def assert_refused(result: subprocess.CompletedProcess[str], rule: str, repo: Path) -> None:
    assert result.returncode == 2, result.stderr
    assert f"qualification refused: [{rule}]" in result.stderr, result.stderr
    assert "fix:" in result.stderr
    assert not (repo / "qualification" / "receipts").exists()
    assert not (repo / ".qualification").exists()


def test_a_dirty_tree_is_refused(repo: Path) -> None:
    (repo / "stray.txt").write_text("untracked\n")
    assert_refused(qualify(repo, "hello"), "dirty-tree", repo)
    (repo / "stray.txt").unlink()
    (repo / "README.md").write_text("edited\n")
    assert_refused(qualify(repo, "hello"), "dirty-tree", repo)


def test_an_ignored_file_does_not_make_the_tree_dirty(repo: Path) -> None:
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert qualify(repo, "hello").returncode == 0


def test_a_workload_must_be_committed_and_unmodified(repo: Path) -> None:
    path = repo / "qualification" / "workloads" / "hello.json"
    data = json.loads(path.read_text())
    data["description"] = "modified after the commit"
    path.write_text(json.dumps(data))
    # Modified: the tree is dirty first; with the edit hidden from git status (assume
    # unchanged), the byte comparison with HEAD must still catch it.
    subprocess.run(["git", "-C", str(repo), "update-index", "--assume-unchanged",
                    "qualification/workloads/hello.json"], check=True)  # fmt: skip
    assert_refused(qualify(repo, "hello"), "workload-uncommitted", repo)


def test_an_ignored_uncommitted_workload_is_refused(repo: Path) -> None:
    (repo / ".gitignore").write_text(
        ".qualification/\n__pycache__/\nqualification/workloads/new.json\n"
    )
    commit_all(repo)
    (repo / "qualification" / "workloads" / "new.json").write_text(
        (repo / "qualification" / "workloads" / "plain.json").read_text()
    )
    assert_refused(qualify(repo, "new"), "workload-uncommitted", repo)


@pytest.mark.parametrize(
    "where",
    ["elsewhere/hello.json", "qualification/hello.json", "qualification/workloads/sub/x.json"],
)
def test_a_workload_outside_the_workloads_directory_is_refused(repo: Path, where: str) -> None:
    target = repo / where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text((repo / "qualification" / "workloads" / "plain.json").read_text())
    commit_all(repo)
    result = run(repo, where, "--variant", "cpu", "--host-id", "test-host")
    assert_refused(result, "workload-location", repo)


def test_a_symlinked_workload_is_refused(repo: Path) -> None:
    (repo / "qualification" / "workloads" / "link.json").symlink_to("plain.json")
    commit_all(repo)
    assert_refused(qualify(repo, "link"), "workload-location", repo)


def test_an_invalid_workload_is_refused(repo: Path) -> None:
    bad = workload([step("noop", "pass")])
    bad["steps"][0]["argv"] = "python -c pass"  # a shell string, not argv
    (repo / "qualification" / "workloads" / "bad.json").write_text(json.dumps(bad))
    unknown = workload([step("noop", "print('${nowhere}')")])
    (repo / "qualification" / "workloads" / "unknown.json").write_text(json.dumps(unknown))
    commit_all(repo)
    assert_refused(qualify(repo, "bad"), "workload-invalid", repo)
    result = qualify(repo, "unknown")
    assert_refused(result, "workload-invalid", repo)
    assert "unknown placeholder ${nowhere}" in result.stderr


@pytest.mark.parametrize(
    ("host", "receipt_id"),
    [
        ("Upper", None), ("ab", None), ("../etc", None), ("-dash", None), ("a/b/c", None),
        ("x" * 129, None), ("good-host", "bad/id"), ("good-host", "No"), ("good-host", ".hidden"),
    ],
)  # fmt: skip
def test_unsafe_ids_are_refused(repo: Path, host: str, receipt_id: str | None) -> None:
    extra = [f"--receipt-id={receipt_id}"] if receipt_id is not None else []
    result = run(repo, "qualification/workloads/hello.json", "--variant", "cpu",
                 f"--host-id={host}", *extra)  # fmt: skip
    kind = "host-id" if receipt_id is None else "receipt-id"
    assert_refused(result, f"unsafe-{kind}", repo)


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        (["--var", "nothing=1"], "variable-unknown"),
        (["--var", "count=2", "--var", "count=3"], "variable-repeated"),
        (["--var", "count=two"], "variable-type"),
        (["--var", "count=1.5"], "variable-type"),
        (["--var", "ratio=nan"], "variable-type"),
        (["--var", "ratio=1e999"], "variable-type"),
        (["--var", "flag=yes"], "variable-type"),
        (["--var", "mode=c"], "variable-value"),
        (["--var", "pinned=y"], "variable-fixed"),
        (["--var", "count"], "variable-syntax"),
        (["--variant", "tpu"], "variant-unknown"),
        (["--model", "."], "model-unused"),
        (["--model-id", "x"], "model-id"),
    ],
)
def test_bad_variables_and_options_are_refused(repo: Path, args: list[str], rule: str) -> None:
    result = qualify(repo, "hello", *args)
    assert_refused(result, rule, repo)


def test_a_variable_without_value_is_refused(repo: Path) -> None:
    result = run(repo, "qualification/workloads/hello.json", "--variant", "cuda",
                 "--host-id", "test-host")  # fmt: skip
    assert_refused(result, "variable-missing", repo)


def test_well_typed_variables_are_used(repo: Path) -> None:
    result = qualify(repo, "hello", "--var", "count=7", "--var", "ratio=2", "--var", "flag=true")
    assert result.returncode == 0, result.stderr
    receipt = json.loads(next((repo / "qualification" / "receipts").rglob("*.json")).read_text())
    assert receipt["variables"] == {
        "count": 7, "flag": True, "mode": "a", "pinned": "x", "ratio": 2,
    }  # fmt: skip
    assert receipt["steps"][0]["argv"][-1] == "7"
    assert receipt["steps"][0]["metrics"] == [{"name": "count", "value": 7}]


def test_a_taken_receipt_id_is_refused_before_running(repo: Path) -> None:
    assert qualify(repo, "plain", "--receipt-id", "fixed-id").returncode == 0
    commit_all(repo, "commit the receipt")
    result = qualify(repo, "plain", "--receipt-id", "fixed-id")
    assert result.returncode == 2
    assert "qualification refused: [receipt-id-taken]" in result.stderr
    receipts = sorted((repo / "qualification" / "receipts").rglob("*.json"))
    assert [path.name for path in receipts] == ["fixed-id.json"]
