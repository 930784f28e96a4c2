"""The dashboard's files over HTTP and in the package: served only from the allowlist,
each answer under the strict Content-Security-Policy, none of them in the OpenAPI
document, every file shipped as package data, and nothing in them that could parse
markup or reach another origin."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest

from kiln_verify.server.routes.ui import ASSETS, CONTENT_SECURITY_POLICY
from tests.control.support import client_of, control_server

ROOT = Path(__file__).resolve().parents[3]
UI = resources.files("kiln_verify.server.ui")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with (
        control_server(tmp_path_factory.mktemp("ui") / "state") as handle,
        client_of(handle, timeout=30) as client,
    ):
        yield client


def test_every_file_is_served_with_its_type_and_the_policy(http: httpx.Client) -> None:
    for name, media_type in {"": ASSETS["index.html"], **ASSETS}.items():
        answer = http.get(f"/ui/{name}")
        assert answer.status_code == 200, name
        assert answer.headers["content-type"] == media_type
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.content == UI.joinpath(name or "index.html").read_bytes()
    moved = http.get("/ui")
    assert (moved.status_code, moved.headers["location"]) == (308, "/ui/")


def test_the_policy_allows_only_this_origin() -> None:
    rules = dict(rule.split(" ", 1) for rule in CONTENT_SECURITY_POLICY.split("; "))
    assert rules["default-src"] == "'self'"
    assert rules["script-src"] == rules["style-src"] == rules["connect-src"] == "'self'"
    assert rules["object-src"] == rules["frame-ancestors"] == rules["base-uri"] == "'none'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("path", ["/ui/__init__.py", "/ui/..%2fapp.py", "/ui/x.js", "/ui/a/b"])
def test_nothing_else_is_served(http: httpx.Client, path: str) -> None:
    answer = http.get(path)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "openenv_route_not_found"


def test_the_dashboard_is_not_part_of_the_api_document(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    assert [path for path in paths if path.startswith("/ui")] == []


def test_every_file_ships_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["kiln_verify.server.ui"]
    files = {item.name for item in UI.iterdir() if item.is_file() and not item.name.endswith(".py")}
    files.discard("__pycache__")
    assert files == set(ASSETS)
    assert all(any(fnmatch.fnmatch(name, p) for p in patterns) for name in files)


def test_no_file_parses_markup_or_names_another_origin() -> None:
    for name in ASSETS:
        text = UI.joinpath(name).read_text(encoding="utf-8")
        assert (
            re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", text)
            is None
        ), name
        assert re.search(r"new Function|setAttribute\(\"on|javascript:", text) is None, name
        urls = re.findall(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text)
        namespace = name == "favicon.svg" and urls == ["http://www.w3.org"]  # SVG's xmlns
        assert urls == [] or namespace, (name, urls)
    page = UI.joinpath("index.html").read_text(encoding="utf-8")
    assert re.search(r"<script(?![^>]*\bsrc=)|<style|\sstyle=|\son[a-z]+=", page) is None
