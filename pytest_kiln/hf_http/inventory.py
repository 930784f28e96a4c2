"""The HF/TRL HTTP case inventory: stable ids, levels and the clause each checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_kiln.cases.model import Level
from pytest_kiln.hf_http import export_checks, import_checks, race
from pytest_kiln.hf_http.context import HfContext

__all__ = ["HF_CASES", "HfCase"]

EXPORT_DOC = "docs/hf-http-export.md"
IMPORT_DOC = "docs/hf-http-import.md"


@dataclass(frozen=True, slots=True)
class HfCase:
    """One case: ``id`` is stable and never reused for another requirement."""

    id: str
    level: Level
    clause: str
    requirement: str
    check: Callable[[HfContext], str | None] = field(repr=False)


HF_CASES: tuple[HfCase, ...] = (
    HfCase(
        "exports.create-headers",
        Level.MUST,
        f"{EXPORT_DOC} § The routes",
        "POST /v1/train/hf/sft/exports answers 201 with exactly one strong ETag, the quoted "
        "export_sha256, and Cache-Control: private, no-store",
        export_checks.check_create_headers,
    ),
    HfCase(
        "exports.detail-headers",
        Level.MUST,
        f"{EXPORT_DOC} § The routes",
        "GET /v1/train/hf/exports/{name} answers the created ETag and no-store",
        export_checks.check_detail_headers,
    ),
    HfCase(
        "exports.download-headers",
        Level.MUST,
        f"{EXPORT_DOC} § The routes",
        "GET .../{name}/download answers application/gzip, the created ETag and no-store, "
        "and one gzip tar rooted at {name}.kiln-hf that verifies as that ETag",
        export_checks.check_download_headers,
    ),
    HfCase(
        "exports.delete-if-match",
        Level.MUST,
        f"{EXPORT_DOC} § The registry",
        "DELETE with If-Match of another identity answers 412 and keeps the export; the "
        "matching If-Match deletes it (then 404)",
        export_checks.check_delete_if_match,
    ),
    HfCase(
        "exports.names",
        Level.MUST,
        f"{EXPORT_DOC} § The routes",
        "hostile and generated names outside 1..128 ASCII, alphanumeric first, then "
        "[A-Za-z0-9_-] are refused with hf_trl_invalid_request; valid ones are created",
        export_checks.check_names,
    ),
    HfCase(
        "exports.sft-one-source",
        Level.MUST,
        f"{EXPORT_DOC} § The routes",
        "an SFT create without exactly one of examples, dataset_path, dataset (non-empty) "
        "is refused with hf_trl_invalid_request and publishes nothing",
        export_checks.check_sft_one_source,
    ),
    HfCase(
        "exports.grpo-one-source",
        Level.MUST,
        f"{EXPORT_DOC} § The routes",
        "a GRPO create without exactly one of groups, dataset_path (non-empty) is refused "
        "with hf_trl_invalid_request and publishes nothing",
        export_checks.check_grpo_one_source,
    ),
    HfCase(
        "exports.delete-racing-download",
        Level.MUST,
        f"{EXPORT_DOC} § The registry",
        "a DELETE sent while a download is held mid-stream never cuts it: the archive "
        "arrives whole and verifies as its ETag, then the DELETE answers 200",
        race.check_delete_racing_download,
    ),
    HfCase(
        "imports.hostile-bodies",
        Level.MUST,
        f"{IMPORT_DOC} § The route",
        "hostile archives (traversal, links, specials, NUL names, case-fold collisions, "
        "bombs, tail garbage, second gzip members, ...) are refused with "
        "hf_trl_import_invalid and GET /v1/adapters is unchanged",
        import_checks.check_hostile_bodies,
    ),
    HfCase(
        "imports.headers-and-names",
        Level.MUST,
        f"{IMPORT_DOC} § The route",
        "a body without Content-Type application/gzip, with a content coding, under a "
        "hostile name, or empty is refused with hf_trl_import_invalid; nothing installed",
        import_checks.check_headers_and_names,
    ),
)
