"""The export registry over real sockets against ``serve --model`` (the tiny model).

Every answer with a Kiln schema name is checked against Kiln's published record; the
registry directory is checked for leftovers after every refusal.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.hf.export import export_grpo, export_sft
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.verify import verify_hf_archive
from tests.hf.export.conftest import ROWS
from tests.hf.grpo_corpus import synthetic_groups, write_groups
from tests.server.hf_exports.kit import code, created, entries, kiln

SFT = "/v1/train/hf/sft/exports"
GRPO = "/v1/train/hf/grpo/exports"
EXPORTS = "/v1/train/hf/exports"


def _download(http: httpx.Client, name: str, into: Path) -> Path:
    response = http.get(f"{EXPORTS}/{name}/download")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/gzip"
    assert response.headers["cache-control"] == "private, no-store"
    assert response.headers["content-disposition"] == (
        f'attachment; filename="{name}.kiln-hf.tar.gz"'
    )
    path = into / f"{name}.kiln-hf.tar.gz"
    path.write_bytes(response.content)
    return path


def test_inline_sft_lifecycle_with_kiln_records_and_headers(
    http: httpx.Client, registry: Path, tmp_path: Path
) -> None:
    split = {"schema": "example.split.v1", "train": [0, 1]}
    summary = created(
        http.post(SFT, json={"name": "inline_01", "examples": ROWS, "split_manifest": split})
    )
    assert (summary["task"], summary["row_count"], summary["source_name"]) == ("sft", 2, "inline")
    assert summary["input_adapter"] is None
    assert stat.S_IMODE(os.stat(registry).st_mode) == 0o700
    assert entries(registry) == ["inline_01.kiln-hf"]
    listed = http.get(EXPORTS)
    assert listed.headers["cache-control"] == "private, no-store"
    assert kiln("ExportList", listed.json()) == {"data": [summary]}
    detail = http.get(f"{EXPORTS}/inline_01")
    assert detail.headers["etag"] == f'"{summary["export_sha256"]}"'
    body = kiln("ExportDetail", detail.json())
    assert body["summary"] == summary
    assert body["manifest"]["export_sha256"] == summary["export_sha256"]
    assert body["manifest"]["data"]["split_manifest"]["relative_path"] == "split_manifest.json"
    archive = _download(http, "inline_01", tmp_path)
    assert verify_hf_archive(archive).export_sha256 == summary["export_sha256"]
    stored = registry / "inline_01.kiln-hf" / "split_manifest.json"
    assert json.loads(stored.read_bytes()) == split
    other = "sha256:" + "0" * 64
    refused = http.delete(f"{EXPORTS}/inline_01", headers={"If-Match": f'"{other}"'})
    assert (refused.status_code, code(refused)) == (412, "hf_trl_export_precondition_failed")
    for bad in (f'W/"{summary["export_sha256"]}"', summary["export_sha256"], "*"):
        answer = http.delete(f"{EXPORTS}/inline_01", headers={"If-Match": bad})
        assert (answer.status_code, code(answer)) == (400, "hf_trl_invalid_request"), bad
    deleted = http.delete(
        f"{EXPORTS}/inline_01", headers={"If-Match": f'"{summary["export_sha256"]}"'}
    )
    assert deleted.status_code == 200
    assert kiln("DeleteExportResponse", deleted.json()) == {
        "status": "deleted",
        "name": "inline_01",
    }
    assert entries(registry) == []
    gone = http.get(f"{EXPORTS}/inline_01/download")
    assert (gone.status_code, code(gone)) == (404, "hf_trl_export_not_found")


def test_http_and_local_exports_are_the_same_bytes(
    http: httpx.Client, registry: Path, tmp_path: Path, tiny_model: Path, sft_file: Path
) -> None:
    summary = created(http.post(SFT, json={"name": "same_sft", "dataset_path": str(sft_file)}))
    assert summary["source_name"] == "dataset_path"
    (tmp_path / "local").mkdir()
    local = export_sft(
        ExportSource(model=tiny_model),
        dataset=sft_file,
        name="same_sft",
        output=tmp_path / "local" / "same_sft.kiln-hf.tar.gz",
    )
    served = _download(http, "same_sft", tmp_path)
    assert served.read_bytes() == local.archive.read_bytes()

    corpus = write_groups(tmp_path / "groups.jsonl", synthetic_groups(tiny_model))
    grpo = created(http.post(GRPO, json={"name": "same_grpo", "dataset_path": str(corpus)}))
    assert (grpo["task"], grpo["source_name"], grpo["row_count"]) == ("grpo", str(corpus), 2)
    local_grpo = export_grpo(
        ExportSource(model=tiny_model),
        dataset=corpus,
        name="same_grpo",
        output=tmp_path / "local" / "same_grpo.kiln-hf.tar.gz",
        source_name=str(corpus),
    )
    assert _download(http, "same_grpo", tmp_path).read_bytes() == local_grpo.archive.read_bytes()
    inline = created(
        http.post(
            GRPO,
            json={"name": "inline_grpo", "groups": [json.loads(line) for line in corpus.open()]},
        )
    )
    assert inline["source_name"] == "inline"
    assert inline["ordered_corpus_sha256"] == grpo["ordered_corpus_sha256"]


@pytest.mark.parametrize(
    ("path", "body", "status", "expected"),
    [
        (SFT, {"name": "x"}, 400, "hf_trl_invalid_request"),
        (SFT, {"name": "x", "examples": []}, 400, "hf_trl_invalid_request"),
        (SFT, {"name": "x", "examples": ROWS, "dataset_path": "/etc/hosts"}, 400, None),
        (SFT, {"name": "x", "dataset_path": "relative.jsonl"}, 400, None),
        (SFT, {"name": "x", "dataset_path": "/nonexistent/rows.jsonl"}, 400, None),
        (SFT, {"name": "x", "dataset": "corrections:active"}, 400, None),
        (SFT, {"name": "x", "examples": ROWS, "dataset": " "}, 400, None),
        (SFT, {"name": "x", "examples": ROWS, "unknown": 1}, 400, None),
        (SFT, {"name": "-x", "examples": ROWS}, 400, None),
        (SFT, {"name": "x" * 129, "examples": ROWS}, 400, None),
        (SFT, {"name": "x", "examples": ROWS, "split_manifest": [1]}, 400, None),
        (SFT, {"name": "x", "examples": ROWS, "invalid_row_policy": "keep"}, 400, None),
        (SFT, {"name": "x", "examples": [{"messages": [{"role": "robot"}]}]}, 400, None),
        (SFT, {"name": "x", "examples": ROWS, "input_adapter": " a"}, 400, None),
        (SFT, {"name": "x", "examples": ROWS, "input_adapter": "nope"}, 404, "adapter_not_found"),
        (GRPO, {"name": "x", "groups": []}, 400, None),
        (GRPO, {"name": "x", "groups": [{"messages": []}]}, 400, None),
        (GRPO, {"name": "x", "dataset_path": "/etc/hosts"}, 400, None),
    ],
)
def test_admission_refusals_publish_nothing(
    http: httpx.Client,
    registry: Path,
    path: str,
    body: dict[str, Any],
    status: int,
    expected: str | None,
) -> None:
    answer = http.post(path, json=body)
    assert answer.status_code == status, answer.text
    assert code(answer) == (expected or "hf_trl_invalid_request")
    assert entries(registry) == []


def test_names_are_never_reused_and_the_registry_is_capped(
    http: httpx.Client, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kiln_verify import limits

    first = created(http.post(SFT, json={"name": "a-1", "examples": ROWS}))
    again = http.post(SFT, json={"name": "a-1", "examples": ROWS[:1]})
    assert (again.status_code, code(again)) == (409, "hf_trl_export_exists")
    monkeypatch.setattr(limits, "MAX_HF_EXPORTS", 1)
    full = http.post(SFT, json={"name": "b", "examples": ROWS})
    assert (full.status_code, code(full)) == (503, "hf_trl_export_capacity")
    assert full.headers["retry-after"]
    assert entries(registry) == ["a-1.kiln-hf"]
    for bad in ("-a", "a.b", "x" * 129):
        answer = http.get(f"{EXPORTS}/{bad}")
        assert (answer.status_code, code(answer)) == (400, "hf_trl_invalid_request"), bad
    assert http.get(f"{EXPORTS}/a-1").json()["summary"] == first


def test_crash_leftovers_are_removed_and_strangers_fail_closed(
    http: httpx.Client, registry: Path, tmp_path: Path
) -> None:
    registry.mkdir(mode=0o700, exist_ok=True)
    for leftover in (".staging-old-" + "a" * 32, ".deleting-old-" + "b" * 32):
        (registry / leftover / "x.kiln-hf").mkdir(parents=True)
        (registry / leftover / "x.kiln-hf" / "train.jsonl").write_text("{}\n")
    created(http.post(SFT, json={"name": "after_crash", "examples": ROWS}))
    assert entries(registry) == ["after_crash.kiln-hf"]
    outside = tmp_path / "outside"
    outside.mkdir()
    for stranger in ("link.kiln-hf", "notes.txt"):
        if stranger.endswith(".kiln-hf"):
            (registry / stranger).symlink_to(outside, target_is_directory=True)
        else:
            (registry / stranger).write_text("hello")
        for answer in (http.get(EXPORTS), http.post(SFT, json={"name": "z", "examples": ROWS})):
            assert (answer.status_code, code(answer)) == (500, "hf_trl_export_failed")
        linked = http.get(f"{EXPORTS}/link/download")
        assert (linked.status_code, code(linked)) in (
            (500, "hf_trl_export_failed"),
            (404, "hf_trl_export_not_found"),
        )
        os.unlink(registry / stranger)
    assert sorted(os.listdir(outside)) == []
    assert entries(registry) == ["after_crash.kiln-hf"]


def test_a_damaged_export_is_refused_but_removable_unconditioned(
    http: httpx.Client, registry: Path
) -> None:
    summary = created(http.post(SFT, json={"name": "damaged", "examples": ROWS}))
    target = registry / "damaged.kiln-hf" / "train.jsonl"
    data = bytearray(target.read_bytes())
    data[2] ^= 0x01
    target.chmod(0o644)
    target.write_bytes(bytes(data))
    for answer in (http.get(f"{EXPORTS}/damaged"), http.get(f"{EXPORTS}/damaged/download")):
        assert (answer.status_code, code(answer)) == (500, "hf_trl_export_failed")
        assert "etag" not in answer.headers
    other = http.delete(f"{EXPORTS}/damaged", headers={"If-Match": f'"sha256:{"1" * 64}"'})
    assert (other.status_code, code(other)) == (412, "hf_trl_export_precondition_failed")
    (registry / "damaged.kiln-hf" / "kiln_hf_export.json").write_text("{broken")
    assert code(http.get(EXPORTS)) == "hf_trl_export_failed"
    conditioned = http.delete(
        f"{EXPORTS}/damaged", headers={"If-Match": f'"{summary["export_sha256"]}"'}
    )
    assert (conditioned.status_code, code(conditioned)) == (500, "hf_trl_export_failed")
    assert http.delete(f"{EXPORTS}/damaged").status_code == 200
    assert entries(registry) == []
    assert kiln("ExportList", http.get(EXPORTS).json()) == {"data": []}


def test_inline_bodies_are_bounded_by_the_export_limit_not_the_control_limit(
    http: httpx.Client, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kiln_verify.limits import MAX_CONTROL_REQUEST_BYTES
    from kiln_verify.server import limits as server_limits

    padding = "p" * (MAX_CONTROL_REQUEST_BYTES + 1)
    big = [{"messages": [{"role": "user", "content": padding}, *ROWS[0]["messages"][1:]]}]
    accepted = http.post(SFT, json={"name": "big_1", "examples": big})
    assert accepted.status_code == 201, accepted.text  # over 1 MiB, under 256 MiB
    monkeypatch.setitem(server_limits.ROUTE_LIMITS, SFT, 4096)
    refused = http.post(SFT, json={"name": "big_2", "examples": big})
    assert (refused.status_code, code(refused)) == (413, "openenv_request_too_large")
    assert entries(registry) == ["big_1.kiln-hf"]
