"""The import itself: a received envelope archive verified, checked and installed.

Runs in a worker thread, on the private staging directory ``.hf-peft-import-*`` the route
created inside ``<state_dir>/adapters/`` (kiln-hf-trl-contract §5.8):

1. strict extraction (:func:`kiln_verify.core.safe_tar.extract_tar_gz`): one gzip member
   and nothing after it, plain USTAR regular files and directories only, no link, special
   entry, traversal, alias or duplicate (also after case folding), no directory payload, at
   most ``MAX_IMPORT_ENTRIES`` entries and ``MAX_IMPORT_EXPANDED_BYTES`` declared bytes, a tar
   tail of at most 10 KiB of zeros, exactly the root ``NAME.kiln-hf-import``; every member
   judged at its header by the envelope's rules (the ten names, each within its per-file
   cap and, once its manifest is read, exactly as large as declared) and ASCII;
2. the envelope verified (:func:`kiln_verify.hf.envelope.verify_envelope`);
3. the local verified import's own steps 4-6 (:func:`kiln_verify.hf.importer.install_envelope`):
   the resident identity recomputed from the model directory and compared field by field
   (``hf_trl_import_identity_mismatch``, 409), the PEFT structure against the resident
   model (400), the six files staged, synced, verified, ``kiln.hf-trl-import.v1`` written and
   the directory published with a no-replace rename, under the adapter barrier.

Every failure of 1-2 (and of the structural check) is ``hf_trl_import_invalid`` with the
step's own code as ``cause``; the server's own I/O failures are ``hf_trl_import_failed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.resident.barrier import adapter_barrier
from kiln_verify.control.resident.serving import peek_resident
from kiln_verify.control.resident.store import adapters_root, listed_names
from kiln_verify.core.safe_tar import ArchiveLimits, MemberRules, extract_tar_gz
from kiln_verify.errors import (
    AdapterUnloadable,
    ApiAdapterAlreadyExists,
    ApiAdapterLoaded,
    ApiAdapterRegistryFull,
    ApiHfImportFailed,
    ApiHfImportIdentityMismatch,
    ApiHfImportInvalid,
    ArchivePathUnsafe,
    ControlApiError,
    FileAccessError,
    KilnError,
    PublishError,
    ResidentIdentityMismatch,
    TargetExists,
    snippet,
)
from kiln_verify.hf.envelope import ENVELOPE_SUFFIX, envelope_rules, verify_envelope
from kiln_verify.hf.importer import INSTALLED_FILES, install_envelope
from kiln_verify.hf.manifest.http_imports import ImportPeftResponse
from kiln_verify.limits import (
    MAX_ERROR_SNIPPET_CHARS,
    MAX_IMPORT_COMPRESSED_BYTES,
    MAX_IMPORT_ENTRIES,
    MAX_IMPORT_EXPANDED_BYTES,
    MAX_SERVER_ADAPTERS,
)

__all__ = ["check_admission", "install_archive"]


class _AsciiEnvelope:
    """The envelope's member rules, plus Kiln's rule that every path is ASCII."""

    def __init__(self, rules: MemberRules) -> None:
        self._rules = rules

    def check(self, relative: str, is_dir: bool, size: int) -> None:
        if not relative.isascii():
            raise ArchivePathUnsafe(f"member {snippet(relative)} is not an ASCII path")
        self._rules.check(relative, is_dir, size)

    def wants(self, relative: str) -> bool:
        return self._rules.wants(relative)

    def capture(self, relative: str, data: bytes) -> None:
        self._rules.capture(relative, data)

    def ready(self) -> bool:
        return self._rules.ready()

    def missing(self) -> None:
        self._rules.missing()


def _limits() -> ArchiveLimits:
    """The import budgets, read at call time (tests lower them)."""
    return ArchiveLimits(
        max_entries=MAX_IMPORT_ENTRIES,
        max_expanded_bytes=MAX_IMPORT_EXPANDED_BYTES,
        max_member_bytes=MAX_IMPORT_EXPANDED_BYTES,
        max_compressed_bytes=MAX_IMPORT_COMPRESSED_BYTES,
    )


def _caused(error: type[ApiHfImportInvalid | ApiHfImportFailed], exc: KilnError) -> KilnError:
    refusal = error(
        f"{exc.code}: {exc.rule[: 4 * MAX_ERROR_SNIPPET_CHARS]}; nothing was installed",
        hint=exc.hint,
    )
    refusal.cause = exc.code
    return refusal


def check_admission(config: ServerConfig, name: str) -> None:
    """The name is free, the registry has room and the resident model holds no adapter of
    that name (cheap; checked before the body is read and again under the barrier)."""
    root = adapters_root(config)
    if (root / name).exists() or (root / name).is_symlink():
        raise ApiAdapterAlreadyExists(f"adapter {name!r} is already installed; never replaced")
    resident = peek_resident(config)
    if resident is not None and name in resident.loaded_adapters:
        raise ApiAdapterLoaded(f"the resident model holds a loaded adapter named {name!r}")
    if len(listed_names(root)) >= MAX_SERVER_ADAPTERS:
        raise ApiAdapterRegistryFull(
            f"the server already holds MAX_SERVER_ADAPTERS = {MAX_SERVER_ADAPTERS} adapters"
        )


@contextmanager
def _barrier(config: ServerConfig, name: str) -> Iterator[None]:
    with adapter_barrier(adapters_root(config)):
        check_admission(config, name)
        yield


def install_archive(
    config: ServerConfig, name: str, archive: Path, staging: Path
) -> ImportPeftResponse:
    """Verify ``archive`` (the received body) and install it as adapter ``name`` (blocking).

    ``staging`` is the request's private directory; extraction happens inside it and the
    caller removes it afterwards."""
    model = config.model
    if model is None:  # the route refused this already
        raise ApiHfImportFailed("the server has no resident model")
    try:
        root = extract_tar_gz(
            archive,
            staging,
            expected_root=name + ENVELOPE_SUFFIX,
            limits=_limits(),
            rules=_AsciiEnvelope(envelope_rules()),
        )
        report = verify_envelope(root)
    except (FileAccessError, PublishError) as exc:
        raise _caused(ApiHfImportFailed, exc) from None
    except KilnError as exc:
        raise _caused(ApiHfImportInvalid, exc) from None
    try:
        outcome = install_envelope(
            root,
            report,
            name=name,
            model=model.path,
            registry_dir=adapters_root(config),
            served_model_id=model.served_model_id,
            guard=lambda: _barrier(config, name),
        )
    except ControlApiError:
        raise
    except TargetExists:
        raise ApiAdapterAlreadyExists(
            f"adapter {name!r} is already installed; never replaced"
        ) from None
    except ResidentIdentityMismatch as exc:
        refusal = ApiHfImportIdentityMismatch(
            f"the result was not trained from this server's resident model: {exc.rule}",
            hint=exc.hint,
        )
        refusal.cause = exc.code
        raise refusal from None
    except AdapterUnloadable as exc:
        raise _caused(ApiHfImportInvalid, exc) from None
    except (FileAccessError, PublishError) as exc:
        raise _caused(ApiHfImportFailed, exc) from None
    except KilnError as exc:
        raise _caused(ApiHfImportInvalid, exc) from None
    receipt = outcome.installed.receipt
    return ImportPeftResponse(
        status="imported",
        name=name,
        task=receipt.task,
        export_sha256=receipt.export_sha256,
        result_sha256=receipt.result_sha256,
        import_sha256=receipt.import_sha256,
        content_revision=outcome.installed.content_revision,
        used_exported_reference_script=receipt.used_exported_reference_script,
        size_bytes=outcome.installed.installed_bytes,
        files=len(INSTALLED_FILES),
    )
