"""The PEFT import route's cases: hostile bodies, headers and names refused, nothing
installed (``GET /v1/adapters`` answers the same document before and after)."""

from __future__ import annotations

from typing import Any, Final

from pytest_kiln.cases.model import CheckFailed
from pytest_kiln.hf_http.context import GZIP, HfContext
from pytest_kiln.hf_http.corpus import hostile_bodies

INVALID: Final = "hf_trl_import_invalid"
#: Import names no server may accept (Kiln's ImportAdapterName: 1..128 ASCII,
#: alphanumeric first, then ``A-Za-z0-9._-`` without ``..``), each one path segment.
HOSTILE_NAMES: Final = (".hidden", "-lead", "a..b", "caf\u00e9", "a b", "x" * 129)


def _unchanged(ctx: HfContext, before: Any, what: str) -> None:
    if ctx.adapters() != before:
        raise CheckFailed(f"{what}: GET /v1/adapters changed after a refused import")


def check_hostile_bodies(ctx: HfContext) -> str:
    before = ctx.adapters()
    name = ctx.fresh_name("import").replace("-", ".")
    for case, body in hostile_bodies(name).items():
        answer = ctx.import_body(name, body, GZIP)
        ctx.refused(answer, INVALID, f"the {case} body")
        _unchanged(ctx, before, case)
    return f"{len(hostile_bodies(name))} hostile archives refused with {INVALID}, nothing installed"


def check_headers_and_names(ctx: HfContext) -> str:
    before = ctx.adapters()
    name = ctx.fresh_name("headers")
    body = hostile_bodies(name)["wrong-root"]  # never reached: the headers come first
    cases: list[tuple[str, str, dict[str, str]]] = [
        ("no Content-Type", name, {}),
        ("Content-Type application/json", name, {"content-type": "application/json"}),
        ("Content-Encoding gzip", name, {**GZIP, "content-encoding": "gzip"}),
        ("Content-Encoding br", name, {**GZIP, "content-encoding": "br"}),
        *((f"the name {n!r}", n, GZIP) for n in HOSTILE_NAMES),
    ]
    for what, target, headers in cases:
        answer = ctx.import_body(target, body, headers)
        ctx.refused(answer, INVALID, what)
        _unchanged(ctx, before, what)
    empty = ctx.import_body(name, b"", GZIP)
    ctx.refused(empty, INVALID, "an empty body")
    _unchanged(ctx, before, "an empty body")
    return f"{len(cases) + 1} bad headers, names and an empty body refused with {INVALID}"
