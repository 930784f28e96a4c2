"""In-process checks of the runner's digests, lock, embedding and exit codes."""

from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path

import pytest

from kiln_verify.hf import runner
from kiln_verify.hf.runner import train

RUNNER_DIR = Path(runner.__file__).parent


def test_canonical_digest_golden() -> None:
    doc = {
        "z": [3, {"kind": "decimal", "value": "2e-5"}],
        "a": {"text": "qwen/3.5", "flag": True},
        "n": 42,
        "self": "ignored",
    }
    assert train.canonical_digest(doc, "self") == (
        "sha256:1a00ddf29092a9e9e9ecd4ea9faf9c48f69208e5439834c6674d1d6bfb45e258"
    )


def test_base_model_aggregate_golden_is_order_independent() -> None:
    shards = [("sha256:" + "22" * 32, 22), ("sha256:" + "11" * 32, 11)]
    golden = "sha256:813979f1d3dd938e49874427651a97344cd1af5409e75aceaa741707616cd7a5"
    assert train.base_model_aggregate(shards) == golden
    assert train.base_model_aggregate(shards[::-1]) == golden


def test_grpo_corpus_golden() -> None:
    rows = [b'{"a":1}', b"[]"]
    assert train.grpo_corpus_digest(rows) == (
        "sha256:3f495e234c3946d423ff971d5ade7fc11e7139a5a24cd3ea35a36cba2c6bdeb3"
    )
    assert train.grpo_corpus_digest(rows[::-1]) != train.grpo_corpus_digest(rows)


def test_embedded_files_are_the_package_bytes() -> None:
    script, lock = runner.reference_script(), runner.environment_lock()
    assert script.data == (RUNNER_DIR / "train.py").read_bytes()
    assert lock.data == (RUNNER_DIR / "requirements.lock").read_bytes()
    for item in (script, lock):
        assert item.sha256 == "sha256:" + hashlib.sha256(item.data).hexdigest()
        assert item.size_bytes == len(item.data) > 0
    assert (script.name, lock.name) == ("train.py", "requirements.lock")


def test_the_lock_matches_the_runner_constants_and_this_environment() -> None:
    pins, platform = train.parse_lock(runner.environment_lock().data)
    assert pins == train.PINNED_PACKAGES
    assert platform == train.PLATFORM_TORCH_RANGE
    low, high = train.PLATFORM_TORCH_BOUNDS
    expected = f">={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    assert expected == train.PLATFORM_TORCH_RANGE
    assert train.release_tuple(train.PINNED_PACKAGES["torch"]) is not None
    # the venv this project tests in is installed exactly from the lock
    assert train.check_packages(platform_torch=False)["torch"].split("+")[0] == "2.13.0"


@pytest.mark.parametrize(
    "lock",
    [
        b"torch>=2.13\n",
        b"torch==2.13.0 ; python_version>'3'\n",
        b"torch==2.13.0\ntorch==2.13.0\n",
        b"extra[x]==1\n",
        b"# kiln-platform-torch: >=1\n# kiln-platform-torch: >=2\n",
    ],
)
def test_malformed_locks_are_rejected(lock: bytes) -> None:
    with pytest.raises(train.ContractError, match="environment-lock"):
        train.parse_lock(lock)


def test_lock_names_are_normalized() -> None:
    assert train.parse_lock(b"# c\n\nJinja2==3.1.6\nsome_pkg==1\n") == (
        {"jinja2": "3.1.6", "some-pkg": "1"},
        None,
    )


def test_train_py_imports_only_the_standard_library_at_module_level() -> None:
    tree = ast.parse((RUNNER_DIR / "train.py").read_bytes())
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            top.add((node.module or "").split(".")[0])
    assert top - {"__future__"} <= set(sys.stdlib_module_names), top
    assert "kiln_verify" not in (RUNNER_DIR / "train.py").read_text()


def test_keyboard_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def interrupted(args: object) -> train.Preflight:
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "preflight", interrupted)
    assert train.main([str(tmp_path), "--base-model", str(tmp_path), "--verify-only"]) == 130


def test_contract_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert train.main([str(tmp_path / "absent"), "--base-model", str(tmp_path)]) == 2
    assert "[bundle-root]" in capsys.readouterr().err


def test_effective_config_validation() -> None:
    good = {"seed": train.tagged("unsigned", 42), "lr": train.tagged("decimal", "2e-5")}
    train.check_effective_config(good)
    for bad in (
        {},
        {"seed": train.tagged("unsigned", -1)},
        {"x": train.tagged("boolean", 1)},
        {" k": train.tagged("text", "v")},
        {"d": train.tagged("decimal", "inf")},
        {"d": train.tagged("decimal", "abc")},
    ):
        with pytest.raises(train.ContractError, match=r"effective-config|manifest-shape"):
            train.check_effective_config(bad)


def test_normalize_messages_for_hf() -> None:
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "f", "arguments": '{"q": 1}'}}],
        }
    ]
    out = train.normalize_messages(messages)
    assert out[0]["content"] is None
    assert out[0]["tool_calls"][0]["function"]["arguments"] == {"q": 1}
    assert messages[0]["content"] == ""  # input untouched


@pytest.mark.parametrize(("rank", "accepted"), [("65536", True), ("65537", False), ("0", False)])
def test_lora_rank_is_bounded_as_the_importer_bounds_it(rank: str, accepted: bool) -> None:
    """A rank the importer refuses (adapter_check: 1..MAX_LORA_RANK) is refused up front."""
    parser = train.build_parser()
    argv = ["BUNDLE", "--base-model", "M", "--lora-rank", rank]
    if accepted:
        assert parser.parse_args(argv).lora_rank == int(rank)
    else:
        with pytest.raises(SystemExit) as caught:
            parser.parse_args(argv)
        assert caught.value.code == 2
