"""Download, verify and publish one server export as a local ``NAME.kiln-hf.tar.gz``.

1. The archive streams into a private (0600) staging file beside the output, created by
   the core publisher (``.NAME.incomplete-<random>``), and is hashed as it arrives
   (:meth:`~kiln_verify.control_client.hf_exports.HfExportClient.download` checks the
   headers, the framing and the 64 GiB cap).
2. The staging file is extracted into a private temporary directory beside the output with
   Kiln's CLI budgets (4,096 entries, 64 GiB declared) and the pristine bundle's rules
   (single root ``NAME.kiln-hf``, regular files and directories only, nothing undeclared,
   no links, traversal, aliases, trailing data or second gzip member), then the pristine
   verifier checks the exact file set, the manifest's self-digest and every artifact, and
   the manifest's identity must equal the creation receipt's ``export_sha256``.
3. Only then is the file published: a kernel no-replace rename and a parent-directory sync.

Every failure of 2 is ``hf_export_download_invalid`` (the cause's code in its message), and
on every failure the staging file and the scratch directory are gone: nothing is published.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.control_client.hf_exports import HfExportClient
from kiln_verify.core.publisher import publication
from kiln_verify.core.safe_tar import extracted_tar_gz
from kiln_verify.errors import HfExportDownloadInvalid, KilnError
from kiln_verify.hf.verify import HfBundleReport, bundle_rules, verify_hf_bundle
from kiln_verify.limits import HASH_CHUNK_BYTES

__all__ = ["FetchedExport", "fetch_export"]

ARCHIVE_MODE = 0o600


@dataclass(frozen=True)
class FetchedExport:
    archive: Path
    archive_sha256: str
    archive_bytes: int
    report: HfBundleReport


def _verify(staged: str, scratch_parent: Path, name: str, export_sha256: str) -> HfBundleReport:
    root = f"{name}.kiln-hf"
    try:
        with (
            tempfile.TemporaryDirectory(prefix=".kiln-hf-verify-", dir=scratch_parent) as scratch,
            extracted_tar_gz(
                staged, scratch, expected_root=root, rules=bundle_rules(completed=False)
            ) as extracted,
        ):
            report = verify_hf_bundle(extracted)
    except KilnError as exc:
        raise HfExportDownloadInvalid(
            f"the downloaded archive does not verify ({exc.code}: {exc.rule})"
        ) from None
    if report.export_sha256 != export_sha256:
        raise HfExportDownloadInvalid(
            f"the archive holds export {report.export_sha256}, not the created {export_sha256}"
        )
    return report


def fetch_export(
    client: HfExportClient, name: str, export_sha256: str, output: Path
) -> FetchedExport:
    """Download ``name`` (whose identity the create answer bound) to the new ``output``."""
    digest = hashlib.sha256()
    size = 0

    def fill(fd: int) -> None:
        nonlocal size
        with (
            client.download(name, export_sha256) as body,
            os.fdopen(fd, "wb", buffering=HASH_CHUNK_BYTES, closefd=False) as out,
        ):
            for chunk in body:
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)

    with publication([output], recover_first=False) as staging:
        staging.fill_file(0, ARCHIVE_MODE, fill)
        report = _verify(staging.entry(0), output.parent, name, export_sha256)
    return FetchedExport(output, f"sha256:{digest.hexdigest()}", size, report)
