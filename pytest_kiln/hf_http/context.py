"""What an HF/TRL HTTP case works with: raw HTTP, the sample input, header rules, cleanup.

Checks talk plain HTTP (``httpx``, redirects never followed, no proxy from the
environment) so that statuses and headers are seen exactly as the server sends them.
Every export a case creates is named ``kilnconf-...`` and deleted (``If-Match``) when the
case ends, whatever its verdict.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Final
from urllib.parse import quote

import httpx

from kiln_verify.openenv.protocol.urls import verifies_tls
from pytest_kiln.cases.model import CheckFailed, NotApplicable
from pytest_kiln.cases.outcome import answer_json

__all__ = [
    "EXPORTS",
    "GRPO",
    "IMPORTS",
    "SFT",
    "SFT_ROWS",
    "HfContext",
]

SFT: Final = "/v1/train/hf/sft/exports"
GRPO: Final = "/v1/train/hf/grpo/exports"
EXPORTS: Final = "/v1/train/hf/exports"
IMPORTS: Final = "/v1/train/hf/peft/imports/"
GZIP: Final = {"content-type": "application/gzip"}

#: Kiln's export name (1..128 ASCII, alphanumeric first).
EXPORT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", re.ASCII)
#: Kiln's ``Sha256``; an export's identity and, quoted, its strong ETag.
DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
#: The codes a server without a resident model answers (kiln-verify's, Kiln's).
NO_MODEL: Final = frozenset({"model_not_loaded", "hf_trl_unavailable"})

#: The one training input the suite sends: two chat rows any chat template renders.
SFT_ROWS: Final[list[dict[str, Any]]] = [
    {
        "messages": [
            {"role": "user", "content": "two plus two"},
            {"role": "assistant", "content": "the answer is four"},
        ]
    },
    {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "the arm"},
            {"role": "assistant", "content": "pull the arm"},
        ]
    },
]


class HfContext:
    """One case's client; :meth:`close` deletes what the case created."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(
            base_url=url,
            follow_redirects=False,
            trust_env=False,
            timeout=60,
            verify=verifies_tls(url),
        )
        self._created: dict[str, str] = {}

    def close(self) -> None:
        try:
            for name, digest in list(self._created.items()):
                self.http.delete(self.export_path(name), headers={"if-match": f'"{digest}"'})
        except httpx.HTTPError:
            pass  # the server is gone: the verdict already says why
        finally:
            self.http.close()

    @staticmethod
    def fresh_name(tag: str) -> str:
        return f"kilnconf-{tag}-{uuid.uuid4().hex[:12]}"

    @staticmethod
    def export_path(name: str, suffix: str = "") -> str:
        return f"{EXPORTS}/{quote(name, safe='')}{suffix}"

    # --- answers -------------------------------------------------------------------------

    json = staticmethod(answer_json)

    @staticmethod
    def error_code(response: httpx.Response) -> str | None:
        """The ``error.code`` of a structured error body (``None`` if it is not one)."""
        try:
            document = response.json()
        except ValueError:
            return None
        error = document.get("error") if isinstance(document, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, str) else None

    def needs_model(self, response: httpx.Response) -> None:
        """A server without a resident model cannot be probed: the case is not applicable."""
        if response.status_code in (409, 503) and self.error_code(response) in NO_MODEL:
            raise NotApplicable(f"the server holds no resident model ({self.error_code(response)})")

    def refused(self, response: httpx.Response, code: str, what: str) -> None:
        """A 4xx answer with the structured error ``code``."""
        self.needs_model(response)
        found = self.error_code(response)
        if not 400 <= response.status_code < 500 or found != code:
            raise CheckFailed(
                f"{what}: answered {response.status_code} {found or response.text[:120]!r}, "
                f"expected a 4xx {code}"
            )

    # --- exports -------------------------------------------------------------------------

    def create_sft(self, name: str, **fields: Any) -> httpx.Response:
        body = {"name": name, "examples": SFT_ROWS, **fields}
        return self.http.post(SFT, json=body)

    def created(self, response: httpx.Response, name: str) -> str:
        """A 201 create answer for ``name``; its export digest (kept for cleanup)."""
        self.needs_model(response)
        if response.status_code != 201:
            raise CheckFailed(
                f"POST create {name!r} answered {response.status_code}, expected 201: "
                f"{response.text[:200]}"
            )
        summary = self.json(response)
        digest = summary.get("export_sha256") if isinstance(summary, dict) else None
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise CheckFailed(f"the create answer has no export_sha256 digest: {summary!r:.200}")
        if summary.get("name") != name:
            raise CheckFailed(f"the create answer names {summary.get('name')!r}, not {name!r}")
        self._created[name] = digest
        return digest

    def create(self, tag: str, **fields: Any) -> tuple[str, str]:
        """A fresh export: (name, export digest)."""
        name = self.fresh_name(tag)
        return name, self.created(self.create_sft(name, **fields), name)

    def deleted(self, name: str) -> None:
        self._created.pop(name, None)

    def export_names(self) -> list[str]:
        answer = self.http.get(EXPORTS)
        self.needs_model(answer)
        document = self.json(answer)
        data = document.get("data") if isinstance(document, dict) else None
        if answer.status_code != 200 or not isinstance(data, list):
            raise CheckFailed(f"GET {EXPORTS} answered {answer.status_code}: {answer.text[:200]}")
        return sorted(str(entry.get("name")) for entry in data if isinstance(entry, dict))

    def absent(self, name: str) -> None:
        """Nothing published under ``name``: detail and download answer 404."""
        for suffix in ("", "/download"):
            answer = self.http.get(self.export_path(name, suffix))
            if answer.status_code != 404:
                raise CheckFailed(
                    f"GET {self.export_path(name, suffix)} answered {answer.status_code}, "
                    "expected 404 (nothing may be published under it)"
                )

    # --- adapters ------------------------------------------------------------------------

    def adapters(self) -> Any:
        answer = self.http.get("/v1/adapters")
        self.needs_model(answer)
        if answer.status_code != 200:
            raise CheckFailed(f"GET /v1/adapters answered {answer.status_code}")
        return self.json(answer)

    def import_body(self, name: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return self.http.post(IMPORTS + quote(name, safe=""), content=body, headers=headers)


def strong_etag(response: httpx.Response, digest: str, what: str) -> str:
    """Exactly one ``ETag``, the strong quoted export digest."""
    values = response.headers.get_list("etag")
    expected = f'"{digest}"'
    if values != [expected]:
        raise CheckFailed(
            f"{what}: ETag {values!r}, expected exactly one strong quoted digest {expected}"
        )
    return expected


def no_store(response: httpx.Response, what: str) -> None:
    """``Cache-Control: private, no-store`` (a deleted name may come back with other bytes)."""
    values = response.headers.get_list("cache-control")
    directives = {d.strip().lower() for value in values for d in value.split(",") if d.strip()}
    if not {"private", "no-store"} <= directives or "public" in directives:
        raise CheckFailed(f"{what}: Cache-Control {values!r}, expected 'private, no-store'")
