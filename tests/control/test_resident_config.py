"""``[model]`` and ``serve --model``: the resident model's configuration, and the adapter
name rule (hostile names, by property)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.control.config import ServerConfig, parse_config
from kiln_verify.control.resident.names import check_adapter_name
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.control.sections.model import ModelSettings, model_settings
from kiln_verify.errors import ApiAdapterNameInvalid, ApiModelNotLoaded, UsageError
from kiln_verify.hf.envelope import IMPORT_NAME_PATTERN


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    return directory


def test_no_model_table_is_no_resident_model() -> None:
    config = parse_config({})
    assert config.model is None
    with pytest.raises(ApiModelNotLoaded) as caught:
        require_resident_model(config, "kind=train")
    assert caught.value.http_status == 409
    assert "kind=train" in caught.value.rule
    assert "--model" in (caught.value.hint or "")


def test_model_table(model_dir: Path) -> None:
    config = parse_config(
        {"model": {"path": str(model_dir), "served_model_id": "tiny", "device": "cuda:1"}}
    )
    assert config.model == ModelSettings(model_dir, "tiny", "cuda:1")
    assert require_resident_model(config) is config.model


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"served_model_id": "x"}, "[model].path"),
        ({"path": ""}, "[model].path"),
        ({"path": "/nonexistent/model"}, "does not exist"),
        ({"path": "MODEL", "device": "tpu"}, "[model].device"),
        ({"path": "MODEL", "served_model_id": ""}, "served_model_id"),
        ({"path": "MODEL", "adapter_dir": "/x"}, "unknown key"),
        ({"path": "MODEL", "model_id": "Qwen/Qwen3.5"}, "unknown key"),
    ],
)
def test_model_table_refusals(model_dir: Path, table: dict[str, str], words: str) -> None:
    raw = {k: str(model_dir) if v == "MODEL" else v for k, v in table.items()}
    with pytest.raises(UsageError) as caught:
        parse_config({"model": raw})
    assert words in caught.value.rule


def test_a_directory_without_config_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no config\.json"):
        parse_config({"model": {"path": str(tmp_path)}})


def test_serve_model_overrides_the_path_only(model_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    current = ModelSettings(model_dir, "tiny", "cpu")
    assert model_settings(current, str(other)) == ModelSettings(other, "tiny", "cpu")
    assert model_settings(None, str(other)) == ModelSettings(other)
    with pytest.raises(UsageError, match="--model"):
        model_settings(None, str(tmp_path / "missing"))


def test_config_default_has_no_model() -> None:
    assert ServerConfig().model is None


HOSTILE = [
    "",
    ".",
    "..",
    "../escape",
    "a/b",
    "a\\b",
    ".hidden",
    "a..b",
    "-leading",
    "_leading",
    "base",
    "BASE",
    "None",
    "null",
    "x\n",
    "x\x00",
    "é",
    "a" * 129,
    " spaced",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused(name: str) -> None:
    with pytest.raises(ApiAdapterNameInvalid):
        check_adapter_name(name)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=140))
def test_the_name_rule_is_the_import_rule_minus_reserved_names(name: str) -> None:
    allowed = (
        IMPORT_NAME_PATTERN.fullmatch(name) is not None
        and ".." not in name
        and name.lower() not in {"base", "none", "null"}
    )
    if allowed:
        assert check_adapter_name(name) == name
        assert "/" not in name
        assert not name.startswith(".")
    else:
        with pytest.raises(ApiAdapterNameInvalid) as caught:
            check_adapter_name(name)
        assert caught.value.http_status == 400
        assert len(caught.value.rule) < 400  # a hostile name is quoted, bounded


def test_the_longest_name_is_accepted() -> None:
    name = "A" + "b.-_9" * 25 + "xy"
    assert len(name) == 128
    assert check_adapter_name(name) == name


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=140)))
def test_installing_under_a_hostile_name_writes_nothing(name: str) -> None:
    import tempfile

    from kiln_verify.control.resident.store import adapters_root, install_adapter

    if check_ok(name):
        return  # a valid name goes on to the verified import (tests/server)
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        (root / "model").mkdir()
        state = root / "state"
        state.mkdir()
        config = ServerConfig(state_dir=state, model=ModelSettings(root / "model"))
        with pytest.raises(ApiAdapterNameInvalid):
            install_adapter(config, bundle=root / "missing.kiln-hf", name=name)
        assert not adapters_root(config).exists()
        assert sorted(p.name for p in root.rglob("*")) == ["model", "state"]


def check_ok(name: str) -> bool:
    try:
        check_adapter_name(name)
    except ApiAdapterNameInvalid:
        return False
    return True


def test_a_relative_model_directory_is_kept_absolute(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer child and the exporter do not run in the server's directory: ``serve
    --model ./model`` must hand them the directory, not the words (a plain-install run of
    the README's training example failed in ``train.py --base-model model``)."""
    monkeypatch.chdir(model_dir.parent)
    assert model_settings(None, "./model") == ModelSettings(model_dir)
    assert parse_config({"model": {"path": "model"}}).model == ModelSettings(model_dir)
