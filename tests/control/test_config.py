"""`kiln-verify serve --config`: the TOML file, its defaults and every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln_verify.control.config import (
    DEFAULT_PORT,
    default_state_dir,
    load_config,
    origin_of,
    parse_config,
)
from kiln_verify.errors import UsageError
from kiln_verify.limits import MAX_SERVER_CONFIG_BYTES

ENV = {"ARCADE_TOKEN": "t0ken", "HOME": "/home/u"}


def test_no_file_means_every_default() -> None:
    config = load_config(None, environ={"HOME": "/home/u"})
    assert (config.host, config.port) == ("127.0.0.1", DEFAULT_PORT)
    assert config.state_dir == Path("/home/u/.local/state/kiln-verify")
    assert config.runs_root == config.state_dir / ".openenv" / "runs"
    settings = config.openenv
    assert (settings.enabled, settings.max_active_runs, settings.max_tracked_runs) == (True, 4, 128)
    assert settings.tracked_run_ttl_secs == 604800
    assert settings.allow_remote_environments is False
    assert dict(config.policies) == {"base": config.policies["base"]}
    assert config.policies["base"].policy == "random"
    assert default_state_dir({"XDG_STATE_HOME": "/s"}) == Path("/s/kiln-verify")


def test_a_full_file(tmp_path: Path) -> None:
    path = tmp_path / "kiln.toml"
    path.write_text(
        """
[server]
host = "0.0.0.0"
port = 9000
state_dir = "/var/lib/k"

[openenv]
max_active_runs = 2
max_tracked_runs = 10
tracked_run_ttl_secs = 60
allow_remote_environments = true

[openenv.credentials.production-arcade]
origin = "https://arcade.example.com:443"
bearer_token_env = "ARCADE_TOKEN"

[policies.base]
policy = "scripted"
options = { script = "actions.json" }

[policies.qwen-lora]
policy = "openai"
options = { base_url = "http://127.0.0.1:8000/v1", model = "qwen" }
""",
        encoding="utf-8",
    )
    config = load_config(str(path), environ=ENV)
    assert (config.host, config.port, config.state_dir) == ("0.0.0.0", 9000, Path("/var/lib/k"))
    assert config.openenv.max_active_runs == 2
    handle = config.openenv.credentials["production-arcade"]
    assert handle.origin == "https://arcade.example.com"
    assert handle.bearer_token_env == "ARCADE_TOKEN"
    assert config.policies["base"].policy == "scripted"
    assert config.policies["qwen-lora"].options["model"] == "qwen"


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"surprise": {}}, "unknown key"),
        ({"openenv": {"max_active_runs": 0}}, "max_active_runs"),
        ({"openenv": {"max_active_runs": 5, "max_tracked_runs": 4}}, "at least max_active"),
        ({"openenv": {"max_tracked_runs": 65537}}, "max_tracked_runs"),
        ({"openenv": {"allow_remote_environments": "yes"}}, "true or false"),
        (
            {
                "openenv": {
                    "credentials": {
                        "h": {"origin": "http://example.com", "bearer_token_env": "ARCADE_TOKEN"}
                    }
                }
            },
            "https",
        ),
        (
            {
                "openenv": {
                    "credentials": {
                        "h": {
                            "origin": "https://example.com/api",
                            "bearer_token_env": "ARCADE_TOKEN",
                        }
                    }
                }
            },
            "path",
        ),
        (
            {
                "openenv": {
                    "credentials": {
                        "h": {"origin": "https://example.com", "bearer_token_env": "UNSET_TOKEN"}
                    }
                }
            },
            "unset",
        ),
        (
            {
                "openenv": {
                    "credentials": {
                        "-": {"origin": "https://example.com", "bearer_token_env": "ARCADE_TOKEN"}
                    }
                }
            },
            "handle",
        ),
        (
            {
                "openenv": {
                    "credentials": {
                        "h": {"origin": "https://example.com", "bearer_token_env": "not a name"}
                    }
                }
            },
            "variable",
        ),
        ({"policies": {"base": {"policy": "gpt"}}}, "policy must be one of"),
        ({"policies": {"base": {"policy": "random", "options": {"k": 1}}}}, "must be a string"),
        ({"policies": {"none": {"policy": "random"}}}, "adapter name"),
        ({"server": {"port": 70000}}, "port"),
    ],
)
def test_refusals_name_the_key(document: dict[str, object], fragment: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_config(document, path="kiln.toml", environ=ENV)
    assert fragment in str(refused.value)
    assert refused.value.exit_code == 2
    assert "t0ken" not in str(refused.value)


def test_the_file_itself_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[openenv\n", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_config(str(bad))
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (MAX_SERVER_CONFIG_BYTES + 1))
    with pytest.raises(UsageError, match="MAX_SERVER_CONFIG_BYTES"):
        load_config(str(big))
    with pytest.raises(UsageError, match="regular file"):
        load_config(str(tmp_path))
    with pytest.raises(UsageError, match="cannot read"):
        load_config(str(tmp_path / "missing.toml"))


def test_origins_are_canonical() -> None:
    assert origin_of("http://127.0.0.1:80/env") == "http://127.0.0.1"
    assert origin_of("HTTPS://Arcade.Example.com:443/") == "https://arcade.example.com"
    assert origin_of("http://[::1]:8000/x") == "http://[::1]:8000"
