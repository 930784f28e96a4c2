"""A bundle's bytes, pinned: collection in steps must write exactly what one ``collect()`` wrote.

The README's main job (``kiln-verify openenv rollout``: the embedded bandit oracle, the
random policy, the default options) and a two-environment plan (rotation ``g mod n``) are
collected and each file's SHA-256 is compared with a value recorded before collection was
split into steps. The oracle listens on a free port, and the port is part of the bytes
(``environment_base_url``), so the pinned form replaces the live ``host:port`` by a fixed one of
the same length and, where one file binds another, the live digest by the pinned one; every
other byte is the collector's own.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.openenv.collect import run_collection
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from oracle.runner import ServerHandle, start_servers
from tests.openenv.collect.options import make_controls

NAMES = ("openenv.rollouts.jsonl", "openenv.replay.json", "openenv.rollout-summary.json")

# Recorded from the collector as it was before issue 26 split it into steps.
PINNED: dict[str, dict[str, str]] = {
    "readme-main-job": {
        NAMES[0]: "sha256:9967dda738e9af0c5addcdf34a60624817f3cc2cd2e79ded800b8fc6cdbc70ce",
        NAMES[1]: "sha256:96603d0ae6a168ff67af86c3ddb78bea6a40376a431e7c11e6e1e82276c3b029",
        NAMES[2]: "sha256:ddc57f6e69968321354f545ed4c34c09b8a81be975a91d8e1de7549e3c3b4488",
    },
    "two-environments": {
        NAMES[0]: "sha256:2af69df4d4bc1e31c09b012c82e204885bb7601fb6f1bf0786a383587885380f",
        NAMES[1]: "sha256:9abd5904c503b8c5392c26e9e2229a381280dbff1e98f5f0ddf96a5f235186f0",
        NAMES[2]: "sha256:7c9a42d39b3dc5a35d62eddfe3c2662706578d27d8ccda5676cfe8cf5998fd33",
    },
}


def _netloc(url: str) -> str:
    """``127.0.0.1:PORT`` of a live URL (its ``http://`` and ``ws://`` forms both hold it)."""
    scheme = "http://"
    assert url.startswith(scheme + "127.0.0.1:"), url
    return url[len(scheme) :]


def _fixed_netloc(index: int, url: str) -> str:
    """A stand-in for a live ``host:port``, of the same length (byte counts stay put)."""
    live = _netloc(url)
    host = "127.0.0.1:"
    return host + str(index).rjust(len(live) - len(host), "9")


def pinned_digests(files: dict[str, bytes], urls: list[str]) -> dict[str, str]:
    """Each file's SHA-256 with live URLs and the digests binding them made port-free."""
    dataset, replay, summary = (files[name] for name in NAMES)
    for index, url in enumerate(urls):
        live, fixed = _netloc(url).encode(), _fixed_netloc(index, url).encode()
        dataset, replay, summary = (
            data.replace(live, fixed) for data in (dataset, replay, summary)
        )
    live_dataset = str(sha256_bytes(files[NAMES[0]])).encode()
    fixed_dataset = str(sha256_bytes(dataset)).encode()
    replay = replay.replace(live_dataset, fixed_dataset)
    live_replay = str(sha256_bytes(files[NAMES[1]])).encode()
    summary = summary.replace(live_dataset, fixed_dataset).replace(
        live_replay, str(sha256_bytes(replay)).encode()
    )
    return {
        name: str(sha256_bytes(data))
        for name, data in zip(NAMES, (dataset, replay, summary), strict=True)
    }


def collect_files(directory: Path, urls: list[str], **options: Any) -> dict[str, bytes]:
    """One ``run_collection`` into ``directory`` with relative output paths (the summary
    records them), read back from disk."""
    previous = os.getcwd()
    os.chdir(directory)
    try:
        controls = make_controls(
            urls, output=NAMES[0], replay_output=NAMES[1], summary_output=NAMES[2], **options
        )
        asyncio.run(run_collection(controls, RandomPolicy()))
    finally:
        os.chdir(previous)
    return {name: (directory / name).read_bytes() for name in NAMES}


@pytest.fixture(scope="module")
def oracles() -> Any:
    handles: list[ServerHandle] = start_servers(["bandit", "counter"])
    yield handles
    for handle in handles:
        handle.stop()


CASES: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {
    "readme-main-job": ((0,), {}),
    "two-environments": ((0, 1), {"groups": 5, "group_size": 3, "seed_start": 7, "max_steps": 4}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bundle_bytes_are_pinned(case: str, oracles: list[ServerHandle], tmp_path: Path) -> None:
    servers, options = CASES[case]
    urls = [oracles[index].base_url for index in servers]
    files = collect_files(tmp_path, urls, **options)
    assert pinned_digests(files, urls) == PINNED[case]
