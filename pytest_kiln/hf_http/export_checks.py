"""The export registry's cases: headers, If-Match, names, exactly-one-source.

Each check gets an :class:`~pytest_kiln.hf_http.context.HfContext` and raises
``CheckFailed`` (or ``NotApplicable``); its return value is the verdict's detail.
"""

from __future__ import annotations

import io
import random
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Any, Final

from pytest_kiln.cases.model import CheckFailed
from pytest_kiln.hf_http.context import (
    EXPORT_NAME,
    GRPO,
    SFT,
    SFT_ROWS,
    HfContext,
    no_store,
    strong_etag,
)

INVALID: Final = "hf_trl_invalid_request"
#: The most bytes a case reads from a download (a tiny export is tens of KiB).
MAX_DOWNLOAD_BYTES: Final = 256 * 1024 * 1024
#: Names no server may accept: empty, a bad first character, a separator, a path, a
#: space, non-ASCII (also look-alikes), control characters, one character too long.
HOSTILE_NAMES: Final = (
    "",
    "-lead",
    "_lead",
    ".hidden",
    "a.b",
    "a/b",
    "../escape",
    "a b",
    "a\\b",
    "caf\u00e9",
    "\u212aelvin",
    "\uff21wide",
    "nul\x00name",
    "line\nbreak",
    "x" * 129,
)
#: Characters a generated hostile name gets one of.
HOSTILE_CHARS: Final = "./\\ :%~+@\x00\x7f\n\t\u00e9\u212a\uff21"
VALID_CHARS: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
GENERATED: Final = 12
SEED: Final = 28


def check_create_headers(ctx: HfContext) -> str:
    name = ctx.fresh_name("create")
    answer = ctx.create_sft(name)
    digest = ctx.created(answer, name)
    etag = strong_etag(answer, digest, "POST create")
    no_store(answer, "POST create")
    return f"201, ETag {etag}, no-store"


def check_detail_headers(ctx: HfContext) -> str:
    name, digest = ctx.create("detail")
    answer = ctx.http.get(ctx.export_path(name))
    if answer.status_code != 200:
        raise CheckFailed(f"GET detail answered {answer.status_code}: {answer.text[:200]}")
    strong_etag(answer, digest, "GET detail")
    no_store(answer, "GET detail")
    summary = ctx.json(answer).get("summary")
    if not isinstance(summary, dict) or summary.get("export_sha256") != digest:
        raise CheckFailed("the detail's summary does not name the created export digest")
    return "200, the created ETag, no-store"


def check_download_headers(ctx: HfContext) -> str:
    name, digest = ctx.create("download")
    with ctx.http.stream("GET", ctx.export_path(name, "/download")) as answer:
        if answer.status_code != 200:
            raise CheckFailed(f"GET download answered {answer.status_code}")
        strong_etag(answer, digest, "GET download")
        no_store(answer, "GET download")
        kind = answer.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/gzip":
            raise CheckFailed(f"GET download: Content-Type {kind!r}, expected application/gzip")
        body = bytearray()
        for chunk in answer.iter_raw():
            body += chunk
            if len(body) > MAX_DOWNLOAD_BYTES:
                raise CheckFailed(f"the download exceeds {MAX_DOWNLOAD_BYTES} bytes")
    found = archive_identity(bytes(body), name)
    if found != digest:
        raise CheckFailed(f"the downloaded archive verifies as {found}, its ETag says {digest}")
    return f"200 application/gzip, {len(body)} bytes rooted at {name}.kiln-hf verifying as its ETag"


def archive_identity(body: bytes, name: str) -> str:
    """The export digest of a downloaded archive: one gzip member, one root
    ``{name}.kiln-hf``, then kiln-verify's full verifier."""
    root = f"{name}.kiln-hf"
    decompressor = zlib.decompressobj(wbits=31)
    try:
        plain = decompressor.decompress(body) + decompressor.flush()
    except zlib.error as exc:
        raise CheckFailed(f"the download is not gzip: {exc}") from None
    if not decompressor.eof or decompressor.unused_data:
        raise CheckFailed("the download is not exactly one whole gzip member")
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r:") as archive:
        names = archive.getnames()
    stray = [n for n in names if n != root and not n.startswith(root + "/")]
    if not names or stray:
        raise CheckFailed(f"the download is not rooted at {root}/ (found {stray[:3] or names})")
    from kiln_verify.errors import KilnError
    from kiln_verify.hf.verify import verify_hf_archive

    with tempfile.TemporaryDirectory(prefix="kilnconf-") as scratch:
        path = Path(scratch) / f"{root}.tar.gz"
        path.write_bytes(body)
        try:
            return str(verify_hf_archive(path).export_sha256)
        except KilnError as exc:
            raise CheckFailed(f"the download fails verification: {exc.code}: {exc.rule}") from None


def check_delete_if_match(ctx: HfContext) -> str:
    name, digest = ctx.create("delete")
    other = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    stale = ctx.http.delete(ctx.export_path(name), headers={"if-match": f'"{other}"'})
    if stale.status_code != 412:
        raise CheckFailed(f"DELETE with If-Match of another identity answered {stale.status_code}")
    kept = ctx.http.get(ctx.export_path(name))
    if kept.status_code != 200:
        raise CheckFailed(f"after a 412 the export is gone (detail {kept.status_code})")
    strong_etag(kept, digest, "GET detail after 412")
    gone = ctx.http.delete(ctx.export_path(name), headers={"if-match": f'"{digest}"'})
    if gone.status_code != 200 or ctx.json(gone) != {"status": "deleted", "name": name}:
        raise CheckFailed(
            f"DELETE with the right If-Match answered {gone.status_code}: {gone.text}"
        )
    ctx.deleted(name)
    ctx.absent(name)
    again = ctx.http.delete(ctx.export_path(name), headers={"if-match": f'"{digest}"'})
    if again.status_code != 404:
        raise CheckFailed(f"a second DELETE answered {again.status_code}, expected 404")
    return "412 kept the export; the matching If-Match deleted it; then 404"


def generated_names(base: str, rng: random.Random) -> list[str]:
    """Valid names grown from ``base`` and hostile ones with one bad character put in."""
    names = []
    for index in range(GENERATED):
        tail = "".join(rng.choice(VALID_CHARS) for _ in range(rng.randrange(0, 40)))
        name = f"{base}{index:02d}{tail}"
        if index % 3:  # two in three hostile, one in three valid
            at = rng.randrange(0, len(name) + 1)
            name = name[:at] + rng.choice(HOSTILE_CHARS) + name[at:]
        names.append(name)
    return names


def check_names(ctx: HfContext) -> str:
    base = ctx.fresh_name("n").replace("-", "")
    rng = random.Random(SEED)
    longest = (base + "x" * 128)[:128]
    names = [*HOSTILE_NAMES, longest, *generated_names(base, rng)]
    before = ctx.export_names()
    accepted = refused = 0
    for name in names:
        answer = ctx.create_sft(name)
        if EXPORT_NAME.fullmatch(name):
            ctx.created(answer, name)
            accepted += 1
            continue
        ctx.refused(answer, INVALID, f"POST create named {name!r}")
        refused += 1
        if 200 <= (path := ctx.http.get(ctx.export_path(name))).status_code < 300:
            raise CheckFailed(
                f"GET detail of the hostile name {name!r} answered {path.status_code}"
            )
    valid = {n for n in names if EXPORT_NAME.fullmatch(n)}
    if set(ctx.export_names()) - set(before) != valid:
        raise CheckFailed("the export list gained other names than the valid ones created")
    return f"{refused} hostile names refused with {INVALID}, {accepted} valid names created"


def _one_source(ctx: HfContext, route: str, bodies: list[dict[str, Any]], what: str) -> str:
    name = ctx.fresh_name(what)
    before = ctx.export_names()
    for fields in bodies:
        answer = ctx.http.post(route, json={"name": name, **fields})
        ctx.refused(answer, INVALID, f"{what} create with {sorted(fields) or 'no source'}")
    if ctx.export_names() != before:
        raise CheckFailed("a refused create changed the export list")
    ctx.absent(name)
    return f"{len(bodies)} requests without exactly one source refused with {INVALID}"


def check_sft_one_source(ctx: HfContext) -> str:
    path = "/nonexistent/kiln-conformance/rows.jsonl"
    detail = _one_source(
        ctx,
        SFT,
        [
            {},
            {"examples": []},
            {"dataset_path": ""},
            {"dataset_path": "   "},
            {"dataset": " "},
            {"examples": SFT_ROWS, "dataset_path": path},
            {"examples": SFT_ROWS, "dataset": "kiln-conformance"},
            {"dataset_path": path, "dataset": "kiln-conformance"},
            {"examples": SFT_ROWS, "dataset_path": path, "dataset": "kiln-conformance"},
        ],
        "sft",
    )
    return detail


def check_grpo_one_source(ctx: HfContext) -> str:
    path = "/nonexistent/kiln-conformance/groups.jsonl"
    return _one_source(
        ctx,
        GRPO,
        [
            {},
            {"groups": []},
            {"dataset_path": ""},
            {"dataset_path": "   "},
            {"groups": [{}], "dataset_path": path},
            {"groups": [], "dataset_path": ""},
        ],
        "grpo",
    )
