"""Base-URL normalization, loopback detection and bearer-token handling."""

from __future__ import annotations

import pytest

from kiln_verify.errors import (
    CredentialInsecure,
    CredentialInvalid,
    CredentialReflected,
    EnvironmentUrlInvalid,
)
from kiln_verify.openenv.protocol.credentials import (
    check_reflection,
    check_transport,
    read_bearer_token,
    redact,
)
from kiln_verify.openenv.protocol.urls import is_loopback_host, normalize_base_url, verifies_tls


@pytest.mark.parametrize(
    ("given", "base", "ws"),
    [
        ("127.0.0.1:8990", "http://127.0.0.1:8990", "ws://127.0.0.1:8990/ws"),
        ("  http://127.0.0.1:8990/  ", "http://127.0.0.1:8990", "ws://127.0.0.1:8990/ws"),
        ("HTTPS://Env.Example.COM", "https://env.example.com", "wss://env.example.com/ws"),
        (
            "https://h.example/prefix/env//",
            "https://h.example/prefix/env",
            "wss://h.example/prefix/env/ws",
        ),
        ("http://[::1]:8000/", "http://[::1]:8000", "ws://[::1]:8000/ws"),
        ("localhost", "http://localhost", "ws://localhost/ws"),
    ],
)
def test_normalization(given: str, base: str, ws: str) -> None:
    url = normalize_base_url(given)
    assert (url.base_url, url.websocket_url) == (base, ws)


@pytest.mark.parametrize(
    "given",
    [
        "",
        "   ",
        "ftp://h",
        "ws://h:1",
        "http://user:pw@h",
        "http://user@h",
        "http://h/?x=1",
        "http://h?",
        "http://h/#frag",
        "http://h:99999",
        "http://",
        "http://h/a b",
        "http://h\\x",
        "http://h/\x00",
    ],
)
def test_refused_urls(given: str) -> None:
    with pytest.raises(EnvironmentUrlInvalid):
        normalize_base_url(given)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("[::1]", True),
        ("LOCALHOST", True),
        ("128.0.0.1", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("0.0.0.0", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


SECRET = "s3cr3t-token-value"


@pytest.mark.parametrize(
    ("url", "verifies"),
    [
        ("http://127.0.0.1:8000", False),
        ("HTTP://example.org/v1", False),
        ("https://example.org", True),
        ("HTTPS://example.org", True),
        ("hTTps://example.org", True),
        ("ftp://example.org", True),
        ("example.org:8000", True),
        ("", True),
        ("http://[::1", True),  # does not parse: verify, as httpx's default does
    ],
)
def test_only_a_plain_http_client_skips_the_tls_context(url: str, verifies: bool) -> None:
    assert verifies_tls(url) is verifies


def test_token_is_read_trimmed_and_never_shown() -> None:
    token = read_bearer_token("KILN_TOKEN", {"KILN_TOKEN": f"  {SECRET}\n"})
    assert token.headers() == {"Authorization": f"Bearer {SECRET}"}
    assert SECRET not in repr(token)
    assert SECRET not in str(token)
    assert SECRET not in f"{token}"
    assert redact(token, f"echo {SECRET}!") == "echo <redacted>!"
    assert redact(None, SECRET) == SECRET


@pytest.mark.parametrize(
    ("name", "environ"),
    [
        ("1BAD", {}),
        ("BAD-NAME", {}),
        ("X" * 129, {}),
        ("MISSING", {}),
        ("EMPTY", {"EMPTY": ""}),
        ("BLANK", {"BLANK": " \t "}),
        ("SPACE", {"SPACE": "a b"}),
        ("CTRL", {"CTRL": "a\x01b"}),
    ],
)
def test_token_rules(name: str, environ: dict[str, str]) -> None:
    with pytest.raises(CredentialInvalid) as caught:
        read_bearer_token(name, environ)
    assert caught.value.exit_code == 2


def test_env_name_length_boundary() -> None:
    name = "X" * 128
    assert read_bearer_token(name, {name: "t"}).env_name == name


def test_plain_http_only_to_loopback() -> None:
    token = read_bearer_token("T", {"T": SECRET})
    check_transport(token, normalize_base_url("http://127.0.0.1:1"))
    check_transport(token, normalize_base_url("https://env.example.com"))
    check_transport(None, normalize_base_url("http://env.example.com"))
    with pytest.raises(CredentialInsecure):
        check_transport(token, normalize_base_url("http://env.example.com"))


def test_reflection_check() -> None:
    token = read_bearer_token("T", {"T": SECRET})
    check_reflection(token, b'{"ok":true}', "body")
    check_reflection(None, SECRET, "body")
    with pytest.raises(CredentialReflected) as caught:
        check_reflection(token, f'{{"authorization":"Bearer {SECRET}"}}'.encode(), "body")
    assert SECRET not in str(caught.value)
    with pytest.raises(CredentialReflected):
        check_reflection(token, f"xx{SECRET}xx", "frame")
