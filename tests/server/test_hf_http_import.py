"""``POST /v1/train/hf/peft/imports/{name}`` over real sockets (docs/hf-http-import.md).

One ``serve --model`` server per module (in a thread) over the session-shared tiny model and
completed SFT bundle (tests/hf/importer). A good import must install exactly what the local
verified import installs and answer Kiln's ``ImportPeftResponse``; every hostile body (the
archive corpus of tests/hostile, same-length mutations, each cap exceeded by one byte, a
stalled body, wrong headers, another model, a taken name) must be refused with its exact
code, with nothing installed and no staging left behind.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import shutil
import socket
import tarfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.hf_imports import install, intake
from kiln_verify.control.resident.store import adapters_root
from kiln_verify.control.sections.model import ModelSettings
from kiln_verify.core.safe_tar import write_tar_gz
from kiln_verify.hf.envelope import ENVELOPE_FILES, write_envelope_archive
from kiln_verify.hf.importer import INSTALLED_FILES, import_peft
from kiln_verify.hf.manifest.http_imports import ImportPeftResponse
from kiln_verify.limits import MAX_ADAPTER_CONFIG_BYTES, MAX_IMPORT_SCRIPT_BYTES
from kiln_verify.records import validate_record
from kiln_verify.server.runner import ServerHandle
from tests.control.support import client_of, resident_config, running
from tests.hf.importer.test_import import _reseal_adapter_config as reseal_adapter_config
from tests.hostile import test_archive_hostile as hostile

ROUTE = "/v1/train/hf/peft/imports/"
GZIP = {"content-type": "application/gzip"}

# Kiln's ImportPeftResponse and the definitions it references, copied from
# contracts/kiln-artifacts-v1.schema.json (ericflo/kiln @40b8a45e).
KILN_IMPORT_PEFT_RESPONSE: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$ref": "#/$defs/ImportPeftResponse",
    "$defs": {
        "ImportPeftResponse": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "status",
                "name",
                "task",
                "export_sha256",
                "result_sha256",
                "import_sha256",
                "content_revision",
                "used_exported_reference_script",
                "size_bytes",
                "files",
            ],
            "properties": {
                "status": {"const": "imported"},
                "name": {"$ref": "#/$defs/ImportAdapterName"},
                "task": {"$ref": "#/$defs/HfTrlTask"},
                "export_sha256": {"$ref": "#/$defs/Sha256"},
                "result_sha256": {"$ref": "#/$defs/Sha256"},
                "import_sha256": {"$ref": "#/$defs/Sha256"},
                "content_revision": {"$ref": "#/$defs/RawSha256"},
                "used_exported_reference_script": {"$ref": "#/$defs/Boolean"},
                "size_bytes": {"$ref": "#/$defs/PositiveInteger"},
                "files": {"$ref": "#/$defs/PositiveInteger"},
            },
        },
        "ImportAdapterName": {
            "type": "string",
            "minLength": 1,
            "maxLength": 128,
            "pattern": "^[A-Za-z0-9](?:[A-Za-z0-9_-]|\\.(?!\\.))*$",
        },
        "HfTrlTask": {"type": "string", "enum": ["sft", "grpo"]},
        "Sha256": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "RawSha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "Boolean": {"type": "boolean"},
        "PositiveInteger": {"type": "integer", "minimum": 1},
    },
}


def kiln_valid(body: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(KILN_IMPORT_PEFT_RESPONSE).validate(body)
    validate_record(ImportPeftResponse, body)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, completed: tuple[Path, Path]) -> ServerConfig:
    return resident_config(tmp_path_factory.mktemp("hf-import") / "state", completed[0])


@pytest.fixture(scope="module")
def server(config: ServerConfig) -> Iterator[ServerHandle]:
    with running(config) as handle:
        yield handle


@pytest.fixture(scope="module")
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    with client_of(server) as client:
        yield client


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory, completed: tuple[Path, Path]) -> Path:
    """A directory of envelope archives, one per adapter name, made on demand."""
    return tmp_path_factory.mktemp("envelopes")


def envelope(archives: Path, bundle: Path, name: str) -> bytes:
    path = archives / f"{name}.kiln-hf-import.tar.gz"
    if not path.exists():
        write_envelope_archive(bundle, name, path)
    return path.read_bytes()


def disk(config: ServerConfig) -> list[str]:
    """Every entry of the adapter directory, staging included."""
    root = adapters_root(config)
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def code(answer: httpx.Response) -> str:
    value: str = answer.json()["error"]["code"]
    return value


def refused(
    http: httpx.Client, config: ServerConfig, name: str, body: Any, **kwargs: Any
) -> httpx.Response:
    before = disk(config)
    listed = http.get("/v1/adapters").json()
    answer = http.post(ROUTE + name, content=body, **kwargs)
    assert answer.status_code >= 400, answer.text
    assert disk(config) == before, "a refused import changed the adapter directory"
    assert http.get("/v1/adapters").json() == listed
    return answer


def test_an_http_import_installs_what_the_local_import_installs(
    http: httpx.Client,
    config: ServerConfig,
    completed: tuple[Path, Path],
    archives: Path,
    tmp_path: Path,
) -> None:
    model, bundle = completed
    before = disk(config)  # other tests of this module's server may have installed theirs
    body = envelope(archives, bundle, "sft-http.v1")
    answer = http.post(ROUTE + "sft-http.v1", content=body, headers=GZIP)
    assert answer.status_code == 201, answer.text
    document = answer.json()
    kiln_valid(document)
    assert answer.headers.get_list("etag") == [f'"{document["import_sha256"]}"']
    assert answer.headers["content-type"] == "application/json"
    local = import_peft(bundle=bundle, name="sft-http.v1", model=model, registry=tmp_path)
    assert {k: v for k, v in local.to_json().items() if k in document} == {
        k: v for k, v in document.items() if k != "size_bytes" and k != "name"
    }
    assert document["size_bytes"] == local.installed.installed_bytes
    installed = adapters_root(config) / "sft-http.v1"
    for file in INSTALLED_FILES:
        assert (installed / file).read_bytes() == (local.directory / file).read_bytes(), file
    assert disk(config) == sorted([*before, "sft-http.v1"])  # no staging left
    (entry,) = [
        e for e in http.get("/v1/adapters").json()["available"] if e["name"] == "sft-http.v1"
    ]
    assert (entry["name"], entry["status"], entry["error"]) == ("sft-http.v1", "available", None)

    # the same name again: adapter_already_exists, the installed bytes untouched
    again = refused(http, config, "sft-http.v1", body, headers=GZIP)
    assert (again.status_code, code(again)) == (409, "adapter_already_exists")
    for file in INSTALLED_FILES:
        assert (installed / file).read_bytes() == (local.directory / file).read_bytes()


def test_headers_names_and_roots_are_refused_before_anything_is_kept(
    http: httpx.Client, config: ServerConfig, completed: tuple[Path, Path], archives: Path
) -> None:
    body = envelope(archives, completed[1], "hdr")
    cases: list[tuple[str, dict[str, str], bytes]] = [
        ("hdr", {}, body),
        ("hdr", {"content-type": "application/json"}, body),
        ("hdr", {**GZIP, "content-encoding": "gzip"}, body),
        ("hdr", {**GZIP, "content-encoding": "br"}, body),
        ("other", GZIP, body),  # the root is hdr.kiln-hf-import, not other.kiln-hf-import
        ("a..b", GZIP, body),
        (".hidden", GZIP, body),
        ("x" * 129, GZIP, body),
        ("hdr", GZIP, b""),
    ]
    for name, headers, data in cases:
        answer = refused(http, config, name, data, headers=headers)
        assert (answer.status_code, code(answer)) == (400, "hf_trl_import_invalid"), (
            name,
            headers,
        )
    twice = [("content-type", "application/gzip"), ("content-type", "application/gzip")]
    answer = refused(http, config, "hdr", body, headers=twice)
    assert code(answer) == "hf_trl_import_invalid"
    identity = http.post(
        ROUTE + "hdr", content=body, headers={**GZIP, "content-encoding": "identity"}
    )
    assert identity.status_code == 201, identity.text


def test_the_hostile_archive_corpus_is_refused_as_import_bodies(
    http: httpx.Client, config: ServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/hostile's corpus, rooted at the import's own root so each reaches its rule."""
    name = "hostile"
    monkeypatch.setattr(hostile, "ROOT", f"{name}.kiln-hf-import")
    for case, (_, build) in sorted(hostile.CASES.items()):
        data = build()
        if not data:
            continue  # the empty body has its own case
        answer = refused(http, config, name, data, headers=GZIP)
        assert (answer.status_code, code(answer)) == (400, "hf_trl_import_invalid"), case
        assert disk(config) == [n for n in disk(config) if not n.startswith(".")], case


def test_same_length_mutations_of_a_good_body_are_refused(
    http: httpx.Client, config: ServerConfig, completed: tuple[Path, Path], archives: Path
) -> None:
    good = envelope(archives, completed[1], "mutant")
    plain = gzip.decompress(good)
    rng = random.Random(28)
    tried = 0
    while tried < 12:
        data = bytearray(good)
        at = rng.randrange(10, len(data))  # the gzip header's mtime/OS bytes are not covered
        data[at] ^= 1 << rng.randrange(8)
        try:
            if zlib.decompress(bytes(data), wbits=31) == plain:
                continue  # an ignored padding bit: the same archive, not a hostile one
        except zlib.error:
            pass
        tried += 1
        answer = refused(http, config, "mutant", bytes(data), headers=GZIP)
        assert (answer.status_code, code(answer)) == (400, "hf_trl_import_invalid"), at


def _header_only(name: str, member: str, size: int) -> bytes:
    """A gzip tar whose member declares ``size`` bytes and holds none: refused at its header."""
    info = tarfile.TarInfo(f"{name}.kiln-hf-import/{member}")
    info.size = size
    return gzip.compress(info.tobuf(tarfile.USTAR_FORMAT) + bytes(1024), mtime=0)


def test_every_cap_exceeded_by_one_byte(
    http: httpx.Client,
    config: ServerConfig,
    completed: tuple[Path, Path],
    archives: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = envelope(archives, completed[1], "capped")
    for member, cap in (
        ("adapter_config.json", MAX_ADAPTER_CONFIG_BYTES),
        ("executed_train.py", MAX_IMPORT_SCRIPT_BYTES),
        ("kiln_hf_export.json", 8 * 1024 * 1024),
        ("tokenizer.json", 512 * 1024 * 1024),
        ("adapter_model.safetensors", 4 * 1024**3),
    ):
        answer = refused(
            http, config, "capped", _header_only("capped", member, cap + 1), headers=GZIP
        )
        assert code(answer) == "hf_trl_import_invalid", member
        cause = answer.json()["error"]["message"].split(":")[0]
        assert cause in ("limit_exceeded", "archive_bomb"), (member, cause)
    # the entry and expanded budgets: an envelope holds at most 11 entries and its files'
    # sizes are declared by its manifests, so the budgets are lowered to one below this body
    with tarfile.open(fileobj=io.BytesIO(body)) as archive:
        members = archive.getmembers()
    entries, expanded = len(members), sum(m.size for m in members)
    monkeypatch.setattr(install, "MAX_IMPORT_ENTRIES", entries - 1)
    assert "archive_bomb" in refused(http, config, "capped", body, headers=GZIP).text
    monkeypatch.setattr(install, "MAX_IMPORT_ENTRIES", entries)
    monkeypatch.setattr(install, "MAX_IMPORT_EXPANDED_BYTES", expanded - 1)
    assert "archive_bomb" in refused(http, config, "capped", body, headers=GZIP).text
    monkeypatch.setattr(install, "MAX_IMPORT_EXPANDED_BYTES", expanded)

    monkeypatch.setattr(intake, "MAX_IMPORT_COMPRESSED_BYTES", len(body) - 1)
    declared = refused(http, config, "capped", body, headers=GZIP)  # Content-Length too large
    assert code(declared) == "hf_trl_import_invalid"
    streamed = refused(http, config, "capped", iter([body[:100], body[100:]]), headers=GZIP)
    assert "MAX_IMPORT_COMPRESSED_BYTES" in streamed.json()["error"]["message"]
    monkeypatch.setattr(intake, "MAX_IMPORT_COMPRESSED_BYTES", len(body))
    exact = http.post(ROUTE + "capped", content=iter([body]), headers=GZIP)
    assert exact.status_code == 201, exact.text


def test_a_stalled_body_times_out_with_nothing_kept(
    server: ServerHandle, config: ServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intake, "HTTP_IMPORT_BODY_IDLE_TIMEOUT_S", 0.3)
    before = disk(config)
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST " + ROUTE.encode() + b"slow HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/gzip\r\nContent-Length: 4096\r\n\r\n" + b"\x1f\x8b" * 8
        )
        started = time.monotonic()
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert time.monotonic() - started < 5
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "hf_trl_import_timeout"
    assert disk(config) == before


def test_another_models_result_is_an_identity_mismatch(
    tmp_path: Path, completed: tuple[Path, Path], archives: Path
) -> None:
    """The same model directory served under another id: every other field agrees, and
    the served model id alone must refuse the import (409)."""
    model, bundle = completed
    other = resident_config(tmp_path / "state", model)
    other = ServerConfig(
        host=other.host,
        port=0,
        state_dir=other.state_dir,
        model=ModelSettings(model, served_model_id="someone/else"),
    )
    with running(other) as handle, client_of(handle) as client:
        answer = refused(
            client, other, "elsewhere", envelope(archives, bundle, "elsewhere"), headers=GZIP
        )
    assert (answer.status_code, code(answer)) == (409, "hf_trl_import_identity_mismatch")
    assert disk(other) == []


def test_a_self_consistent_adapter_the_model_cannot_load_is_refused(
    http: httpx.Client, config: ServerConfig, completed: tuple[Path, Path], tmp_path: Path
) -> None:
    """A wrong rank resealed into the result: every digest agrees, the structure does not."""
    bundle = Path(shutil.copytree(completed[1], tmp_path / "copy" / completed[1].name))
    adapter_config = json.loads((bundle / "adapter_config.json").read_text())
    adapter_config["r"] += 2
    reseal_adapter_config(bundle, adapter_config)
    root = tmp_path / "wide.kiln-hf-import"
    root.mkdir()
    for file in ENVELOPE_FILES:
        shutil.copyfile(bundle / file, root / file)
    write_tar_gz(root, tmp_path / "wide.tar.gz", root_name=root.name)
    body = (tmp_path / "wide.tar.gz").read_bytes()
    answer = refused(http, config, "wide", body, headers=GZIP)
    assert (answer.status_code, code(answer)) == (400, "hf_trl_import_invalid")
    assert answer.json()["error"]["message"].startswith("adapter_unloadable")
