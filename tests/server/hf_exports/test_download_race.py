"""A download holds the registry lock until its last byte: a racing delete waits for it.

The export carries a 16 MiB incompressible input adapter, so its archive cannot fit in the
sockets' buffers: while the client holds the stream unread, the server is still sending.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import httpx

from kiln_verify.hf.verify import verify_hf_archive
from kiln_verify.server.runner import ServerHandle
from tests.control.support import client_of
from tests.hf.export.conftest import ROWS
from tests.server.hf_exports.kit import code, created, entries

ADAPTER_BYTES = 16 * 1024 * 1024


def _big_adapter(state_dir: Path) -> None:
    adapter = state_dir / "adapters" / "big"
    if adapter.exists():
        return
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 2, "lora_alpha": 4}))
    (adapter / "adapter_model.safetensors").write_bytes(os.urandom(ADAPTER_BYTES))


def test_delete_waits_for_the_download_to_end(
    http: httpx.Client, registry: Path, state_dir: Path, tmp_path: Path
) -> None:
    _big_adapter(state_dir)
    body = {"name": "raced", "examples": ROWS, "input_adapter": "big"}
    summary = created(http.post("/v1/train/hf/sft/exports", json=body))
    assert summary["input_adapter"] == "big"
    answers: list[httpx.Response] = []
    archive = tmp_path / "raced.kiln-hf.tar.gz"
    with (
        http.stream("GET", "/v1/train/hf/exports/raced/download") as response,
        archive.open("wb") as out,
    ):
        assert response.headers["etag"] == f'"{summary["export_sha256"]}"'
        chunks = response.iter_raw(64 * 1024)
        out.write(next(chunks))
        racer = threading.Thread(
            target=lambda: answers.append(http.delete("/v1/train/hf/exports/raced"))
        )
        racer.start()
        time.sleep(0.5)
        assert racer.is_alive()  # the delete waits behind the stream
        assert entries(registry) == ["raced.kiln-hf"]
        for chunk in chunks:
            out.write(chunk)
    racer.join(timeout=30)
    assert [answer.status_code for answer in answers] == [200]
    assert archive.stat().st_size > ADAPTER_BYTES
    assert verify_hf_archive(archive).export_sha256 == summary["export_sha256"]
    assert entries(registry) == []
    again = http.get("/v1/train/hf/exports/raced/download")
    assert (again.status_code, code(again)) == (404, "hf_trl_export_not_found")


def test_an_abandoned_download_releases_the_registry(
    http: httpx.Client, registry: Path, state_dir: Path, server: ServerHandle
) -> None:
    _big_adapter(state_dir)
    body = {"name": "left", "examples": ROWS, "input_adapter": "big"}
    created(http.post("/v1/train/hf/sft/exports", json=body))
    with (
        client_of(server) as other,
        other.stream("GET", "/v1/train/hf/exports/left/download") as response,
    ):
        next(response.iter_raw(64 * 1024))
    # the connection is closed mid-archive: the lock must come back, not wait forever
    started = time.monotonic()
    deleted = http.delete("/v1/train/hf/exports/left", timeout=20)
    assert deleted.status_code == 200
    assert time.monotonic() - started < 10
    assert entries(registry) == []
