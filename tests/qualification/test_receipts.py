"""``--check``, the source-tree hash, model identity and the real workload files."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from qualification.runner.common import canonical_bytes, sha256_bytes
from qualification.runner.gitstate import tree_hash
from qualification.runner.receipt import seal
from qualification.runner.workload import check_semantics
from tests.qualification.fixture import (
    REPO,
    commit_all,
    git,
    make_repo,
    metric_code,
    only_receipt,
    qualify,
    run,
    step,
    step_record,
    workload,
)


@pytest.fixture
def passed(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path, {"ok": workload([step("s", metric_code("rows", "3"))])})
    assert qualify(repo, "ok").returncode == 0
    path, _ = only_receipt(repo)
    return repo, path


def check(repo: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return run(repo, "--check", str(path))


def rewrite(path: Path, edit: dict[str, object], *, reseal: bool) -> None:
    receipt = json.loads(path.read_text())
    receipt.update(edit)
    path.write_text(json.dumps(seal(receipt) if reseal else receipt))


def test_check_accepts_a_good_receipt(passed: tuple[Path, Path]) -> None:
    repo, path = passed
    result = check(repo, path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"receipt ok: {path}"
    commit_all(repo, "commit the receipt")  # still good once committed, from a clean tree
    assert check(repo, path).returncode == 0


def test_check_rejects_an_edited_receipt(passed: tuple[Path, Path]) -> None:
    repo, path = passed
    rewrite(path, {"host_id": "other-host"}, reseal=False)
    result = check(repo, path)
    assert result.returncode == 1
    assert "receipt_sha256 does not match" in result.stderr


def test_check_rejects_a_resealed_receipt_whose_facts_are_wrong(passed: tuple[Path, Path]) -> None:
    repo, path = passed
    original = json.loads(path.read_text())
    workload_edit = dict(original["workload"], sha256=sha256_bytes(b"other"))
    rewrite(path, {"workload": workload_edit}, reseal=True)
    assert "workload digest differs" in check(repo, path).stderr
    wrong_tree = dict(original["source"], tree_hash=sha256_bytes(b"x"))
    rewrite(path, {"workload": original["workload"], "source": wrong_tree}, reseal=True)
    assert "source tree hash differs" in check(repo, path).stderr
    rewrite(path, {"source": original["source"], "verdict": "fail"}, reseal=True)
    assert "verdict pass requires no failures" in check(repo, path).stderr
    rewrite(path, {"verdict": "pass", "schema_version": 2}, reseal=True)
    assert "schema: at /schema_version" in check(repo, path).stderr


def test_check_rejects_a_changed_log_and_a_misplaced_receipt(passed: tuple[Path, Path]) -> None:
    repo, path = passed
    moved = path.parent.parent / "other-host" / path.name
    moved.parent.mkdir()
    moved.write_bytes(path.read_bytes())
    assert "is not at receipts/VARIANT/HOST/RECEIPT_ID.json" in check(repo, moved).stderr
    moved.unlink()
    receipt = json.loads(path.read_text())
    log = repo / step_record(receipt, "s")["stdout"]["path"]
    log.write_text(log.read_text() + "edited\n")
    result = check(repo, path)
    assert result.returncode == 1
    assert "differs from its recorded digest" in result.stderr


def test_tree_hash_follows_its_documented_definition(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {})
    commit = git(repo, "rev-parse", "HEAD").strip()
    digest = hashlib.sha256(b"kiln-verify-source-tree-v1\0")
    entries = [line.split("\t") for line in git(repo, "ls-files", "-s", "-z").split("\0")[:-1]]
    paths = sorted(
        ((name, meta.split(" ")[0]) for meta, name in entries), key=lambda e: e[0].encode()
    )
    assert ("qualification/run.py", "100755") in paths
    for name, mode in paths:
        content = (repo / name).read_bytes()
        digest.update(f"{mode}\0{name}\0{len(content)}\0".encode())
        digest.update(hashlib.sha256(content).hexdigest().encode() + b"\0")
    assert tree_hash(repo, commit) == ("sha256:" + digest.hexdigest(), len(paths))


def test_tree_hash_excludes_receipts_and_nothing_else(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {})
    before = tree_hash(repo, "HEAD")
    receipt = repo / "qualification" / "receipts" / "cpu" / "h-1" / "r.json"
    receipt.parent.mkdir(parents=True)
    receipt.write_text("{}\n")
    commit_all(repo)
    assert tree_hash(repo, "HEAD") == before
    (repo / "qualification" / "receiptsx.json").write_text("{}\n")
    commit_all(repo)
    assert tree_hash(repo, "HEAD")[1] == before[1] + 1


def test_a_built_model_and_a_given_model_are_identified(tmp_path: Path) -> None:
    build = step("build", "import os, sys; os.makedirs(sys.argv[1]); "
                 "open(os.path.join(sys.argv[1], 'config.json'), 'w').write('{}')",
                 "${model_path}", only_without_model=True)  # fmt: skip
    use = step("use", metric_code("model", "__import__('sys').argv[1]"), "${model_path}")
    repo = make_repo(tmp_path, {"m": workload([build, use], model="optional")})
    assert qualify(repo, "m").returncode == 0
    path, receipt = only_receipt(repo)
    model = receipt["model"]
    assert (model["source"], model["unchanged"], model["model_id"]) == ("built", None, None)
    config_sha = sha256_bytes(b"{}")
    assert model["files"] == [{"path": "config.json", "bytes": 2, "sha256": config_sha}]
    expected = "kiln-verify-model-content-v1\0config.json\x002\0" + config_sha[7:] + "\0"
    assert model["content_sha256"] == sha256_bytes(expected.encode())
    path.unlink()
    given = tmp_path / "given"
    given.mkdir()
    (given / "config.json").write_text("{}")
    assert qualify(repo, "m", "--model", str(given), "--model-id", "tiny/x").returncode == 0
    _, receipt = only_receipt(repo)
    assert [s["status"] for s in receipt["steps"]] == ["skipped", "passed"]
    assert step_record(receipt, "use")["metrics"] == [{"name": "model", "value": str(given)}]
    assert receipt["model"]["content_sha256"] == model["content_sha256"]
    assert (receipt["model"]["source"], receipt["model"]["unchanged"]) == ("given", True)


def test_a_model_changed_by_a_step_fails_the_run(tmp_path: Path) -> None:
    touch = step(
        "touch", "open(__import__('sys').argv[1] + '/extra', 'w').close()", "${model_path}"
    )
    repo = make_repo(tmp_path, {"m": workload([touch], model="required")})
    given = tmp_path / "given"
    given.mkdir()
    (given / "config.json").write_text("{}")
    assert qualify(repo, "m").returncode == 2
    assert qualify(repo, "m", "--model", str(given)).returncode == 1
    _, receipt = only_receipt(repo)
    assert receipt["failures"] == ["the model directory changed during the run"]
    assert receipt["model"]["unchanged"] is False


@pytest.mark.parametrize("name", ["openenv-interop-v1", "hf-trl-roundtrip-v1"])
def test_the_real_workloads_are_valid(name: str) -> None:
    relpath = f"qualification/workloads/{name}.json"
    data = json.loads((REPO / relpath).read_bytes())
    schema = json.loads((REPO / "qualification/schema/workload-v1.schema.json").read_bytes())
    jsonschema.validate(data, schema)
    check_semantics(data, relpath)
    assert data["workload_id"] == name
    assert {"cpu", "cuda"} <= set(data["variants"])
    assert canonical_bytes(data)  # strict JSON round trip (no NaN)
