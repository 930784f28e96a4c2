"""Verification of HF/TRL bundles: archives, pristine exports and completed results.

``verify_path`` accepts a ``NAME.kiln-hf.tar.gz`` (extracted with every hostile-archive
rule of :mod:`kiln_verify.core.safe_tar` into a private temporary directory, expected
root ``NAME.kiln-hf``), a pristine bundle directory or, with ``completed=True``, a
completed one. It checks, in order:

1. the exact recursive file set: every declared file present (``hf_bundle_missing_file``),
   nothing else (``hf_bundle_extra_file``); links and special files refused;
2. the export manifest: version, shape, cross-record rules, self-digest; for a completed
   bundle also the result manifest and its link to the export (``hf_identity_mismatch``);
3. every artifact's size and SHA-256 (``size_mismatch`` / ``digest_mismatch``); for a
   completed bundle also the output adapter's structure against the exported model config
   (:func:`~kiln_verify.hf.adapter_check.check_exported_adapter`, ``adapter_unloadable``),
   the check ``hf import-peft`` applies, without reading weights;
4. the data: SFT ingestion receipt against the selection, every ``train.jsonl`` row
   canonical and hashing to its receipt entry, the TRL template's generation blocks; GRPO
   corpus rows canonical, one width, one behaviour policy, identities equal to the export's
   model, ordered corpus digest and row count (:func:`scan_grpo_corpus`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from kiln_verify.core.digest import GrpoCorpusHasher, Sha256Digest, sha256_bytes, verify
from kiln_verify.core.jsonio import loads
from kiln_verify.core.paths import open_regular_beneath, open_root
from kiln_verify.core.safe_tar import extracted_tar_gz
from kiln_verify.errors import (
    DigestMismatch,
    HfBundleExtraFile,
    HfBundleMissingFile,
    HfGrpoCorpusInvalid,
    HfIdentityMismatch,
    HfTrainingTemplateUnderivable,
    KilnError,
    PathNotRegular,
    PathSymlink,
    RecordInvalid,
    UsageError,
)
from kiln_verify.hf.adapter_check import check_exported_adapter
from kiln_verify.hf.archive_rules import DeclaredMembers, Side
from kiln_verify.hf.digests import adapter_content_revision, sft_parsed_row_digest
from kiln_verify.hf.export.sft import SftExample, sft_row_bytes
from kiln_verify.hf.export.template import has_generation_blocks
from kiln_verify.hf.manifest import (
    ExportManifest,
    FileIdentity,
    GrpoGroup,
    TrainingResult,
    grpo_row_bytes,
    parse_grpo_group,
    read_export,
    read_result,
    read_sft_ingestion,
)
from kiln_verify.hf.replay import TokenReplay
from kiln_verify.hf.runner import reference_script
from kiln_verify.limits import (
    MAX_CHAT_TEMPLATE_BYTES,
    MAX_GRPO_DATASET_BYTES,
    MAX_GRPO_GROUPS,
    MAX_GRPO_ROW_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_SFT_RECEIPT_BYTES,
    MAX_SFT_ROW_BYTES,
    MAX_TOKENIZER_BYTES,
)
from kiln_verify.records import validate_record

__all__ = [
    "ARCHIVE_SUFFIX",
    "BUNDLE_SUFFIX",
    "EXPORT_FILES",
    "EXPORT_MANIFEST",
    "RESULT_FILES",
    "RESULT_MANIFEST",
    "BundleReport",
    "GrpoBinding",
    "GrpoScan",
    "behaviour_adapter",
    "bundle_files",
    "bundle_name",
    "bundle_rules",
    "check_grpo_group",
    "export_identities",
    "read_bundle_file",
    "read_identified",
    "read_paired_result",
    "scan_grpo_corpus",
    "verify_archive",
    "verify_bundle",
    "verify_path",
]

EXPORT_MANIFEST: Final = "kiln_hf_export.json"
RESULT_MANIFEST: Final = "kiln_hf_result.json"
RESULT_FILES: Final = (
    "executed_train.py",
    "adapter_config.json",
    "adapter_model.safetensors",
    RESULT_MANIFEST,
)
BUNDLE_SUFFIX: Final = ".kiln-hf"
ARCHIVE_SUFFIX: Final = ".kiln-hf.tar.gz"
EXPORT_FILES: Final = frozenset(
    {
        EXPORT_MANIFEST,
        "kiln_model_config.json",
        "tokenizer.json",
        "chat_template.jinja",
        "kiln_training_chat_template.jinja",
        "training_chat_template.jinja",
        "train.jsonl",
        "train.py",
        "requirements.lock",
        "sft_ingestion.json",
        "split_manifest.json",
        "input_adapter/adapter_config.json",
        "input_adapter/adapter_manifest.json",
        "input_adapter/adapter_model.safetensors",
    }
)
"""Every path an export manifest can declare (each identity has a fixed path), and itself."""


@dataclass(frozen=True)
class BundleReport:
    """What a successful verification established."""

    kind: Literal["pristine", "completed"]
    task: str
    export_sha256: str
    rows: int
    files: int
    reference_script_match: bool
    """The bundle's ``train.py`` is this kiln-verify's embedded reference runner."""
    result_sha256: str | None = None
    used_exported_reference_script: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": "verified",
            "kind": self.kind,
            "task": self.task,
            "export_sha256": self.export_sha256,
            "rows": self.rows,
            "files": self.files,
            "reference_script_match": self.reference_script_match,
        }
        if self.result_sha256 is not None:
            out["result_sha256"] = self.result_sha256
            out["used_exported_reference_script"] = self.used_exported_reference_script
        return out


def bundle_name(archive: str | os.PathLike[str]) -> str:
    """``NAME.kiln-hf`` for ``.../NAME.kiln-hf.tar.gz`` (the archive's single root)."""
    base = os.path.basename(os.fspath(archive))
    if not base.endswith(ARCHIVE_SUFFIX) or len(base) == len(ARCHIVE_SUFFIX):
        raise UsageError(
            f"an archive must be named NAME{ARCHIVE_SUFFIX}",
            path=os.fspath(archive),
            hint="keep the exported archive's file name; it names the bundle root",
        )
    return base.removesuffix(".tar.gz")


def bundle_files(root: str) -> set[str]:
    """Every regular file beneath ``root`` (relative, ``/``-separated); links and special
    files fail; an empty directory is an extra entry."""
    found: set[str] = set()

    def walk(fd: int, prefix: str) -> None:
        for name in sorted(os.listdir(fd)):
            rel = prefix + name
            info = os.lstat(name, dir_fd=fd)
            shown = os.path.join(root, rel)
            if stat.S_ISLNK(info.st_mode):
                raise PathSymlink("a bundle must not contain symbolic links", path=shown)
            if stat.S_ISDIR(info.st_mode):
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    before = len(found)
                    walk(child, rel + "/")
                    if len(found) == before:
                        raise HfBundleExtraFile(
                            "an empty directory is not part of any bundle", path=shown
                        )
                finally:
                    os.close(child)
            elif stat.S_ISREG(info.st_mode):
                found.add(rel)
            else:
                raise PathNotRegular("a bundle holds only regular files", path=shown)

    fd = open_root(root)
    try:
        walk(fd, "")
    finally:
        os.close(fd)
    return found


def read_bundle_file(root: str, relative: str, max_bytes: int) -> bytes:
    with open_regular_beneath(root, relative) as fd, os.fdopen(os.dup(fd), "rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RecordInvalid(
            f"{relative} is larger than {max_bytes} bytes", path=os.path.join(root, relative)
        )
    return data


def _changed(shown: str) -> DigestMismatch:
    return DigestMismatch(
        "the file changed after its identity was checked (read again, it is other bytes)",
        path=shown,
    )


def read_identified(root: str, ident: FileIdentity, max_bytes: int) -> bytes:
    """A declared file's bytes for a content check, read through one descriptor and proven
    to be the bytes its identity names (size and SHA-256), so a file swapped after
    :func:`~kiln_verify.core.digest.verify` hashed it is refused (``digest_mismatch``)
    instead of being checked in place of the hashed one (issue 14.6)."""
    data = read_bundle_file(root, ident.relative_path, max_bytes)
    if len(data) != ident.size_bytes or str(sha256_bytes(data)) != ident.sha256:
        raise _changed(os.path.join(root, ident.relative_path))
    return data


def export_identities(export: ExportManifest) -> list[FileIdentity]:
    """Every file identity an export manifest declares (the manifest itself excluded)."""
    model, data = export.model, export.data
    out = [
        model.config_file,
        model.tokenizer,
        model.chat_template,
        model.native_training_chat_template,
        model.trl_training_chat_template,
        data.dataset,
        export.reference_script,
        export.environment_lock,
    ]
    if data.sft_selection is not None:
        out.append(data.sft_selection.ingestion_receipt)
    if data.split_manifest is not None:
        out.append(data.split_manifest)
    adapter = export.input_adapter
    if adapter is not None:
        out += [adapter.config, adapter.model]
        if adapter.kiln_manifest is not None:
            out.append(adapter.kiln_manifest)
    return out


def read_paired_result(root: str, export: ExportManifest, *, holder: str) -> TrainingResult:
    """The training result beside ``export`` under ``root``; it must name that export
    and its task (``holder``: what the two sit in, for the message)."""
    source = os.path.join(root, RESULT_MANIFEST)
    result = read_result(read_bundle_file(root, RESULT_MANIFEST, MAX_MANIFEST_BYTES), source=source)
    if result.export_sha256 != export.export_sha256:
        raise HfIdentityMismatch(
            f"the result names export {result.export_sha256}, the {holder}'s export is "
            f"{export.export_sha256}",
            path=source,
        )
    if result.task != export.task:
        raise HfIdentityMismatch(
            f"the result is for task {result.task!r}, the export for {export.task!r}",
            path=source,
        )
    return result


def _result_identities(result: TrainingResult) -> list[FileIdentity]:
    return [result.trainer.script, result.output_adapter.config, result.output_adapter.model]


def _check_file_set(root: str, found: set[str], declared: set[str], *, completed: bool) -> None:
    missing = sorted(declared - found)
    if missing:
        untrained = completed and RESULT_MANIFEST in missing
        raise HfBundleMissingFile(
            f"declared file {missing[0]} is missing ({len(missing)} missing)",
            path=os.path.join(root, missing[0]),
            hint=(
                f"this bundle has not been trained yet: run its train.py first "
                f"(python -I {os.path.join(root, 'train.py')} {root} --base-model MODEL)"
                if untrained
                else None
            ),
        )
    extra = sorted(found - declared)
    if extra:
        hint = None
        if not completed and RESULT_MANIFEST in extra:
            hint = "this is a completed bundle; verify it with --completed"
        raise HfBundleExtraFile(
            f"{extra[0]} is not declared by the bundle's manifests ({len(extra)} extra)",
            path=os.path.join(root, extra[0]),
            hint=hint,
        )


def verify_bundle(root: str | os.PathLike[str], *, completed: bool = False) -> BundleReport:
    """Verify a bundle directory (pristine, or completed with ``completed=True``)."""
    shown = os.fspath(root)
    if not os.path.isdir(shown):
        raise UsageError("the bundle path is not a directory", path=shown)
    found = bundle_files(shown)
    required = {EXPORT_MANIFEST} | ({RESULT_MANIFEST} if completed else set())
    _check_file_set(shown, found, required | found, completed=completed)
    export = read_export(
        read_bundle_file(shown, EXPORT_MANIFEST, MAX_MANIFEST_BYTES),
        source=os.path.join(shown, EXPORT_MANIFEST),
    )
    identities = export_identities(export)
    declared = {EXPORT_MANIFEST} | {ident.relative_path for ident in identities}
    result: TrainingResult | None = None
    if completed:
        result = read_paired_result(shown, export, holder="bundle")
        identities += _result_identities(result)
        declared |= set(RESULT_FILES)
    if len(declared) != len(identities) + 1 + (1 if completed else 0):
        raise RecordInvalid("two artifact identities name one path", path=shown)
    _check_file_set(shown, found, declared, completed=completed)
    for ident in identities:
        verify(shown, ident.to_artifact())
    if completed:
        check_exported_adapter(shown)  # what import-peft requires of the adapter's structure
    if export.task == "sft":
        _check_sft(shown, export)
    else:
        replay = TokenReplay(
            read_identified(shown, export.model.tokenizer, MAX_TOKENIZER_BYTES),
            read_identified(shown, export.model.chat_template, MAX_CHAT_TEMPLATE_BYTES),
        )
        scan_grpo_corpus(
            os.path.join(shown, "train.jsonl"), GrpoBinding.of(export), totals=export, replay=replay
        )
    embedded = reference_script()
    return BundleReport(
        kind="completed" if completed else "pristine",
        task=export.task,
        export_sha256=export.export_sha256,
        rows=export.data.row_count,
        files=len(declared),
        reference_script_match=export.reference_script.sha256 == embedded.sha256,
        result_sha256=result.result_sha256 if result is not None else None,
        used_exported_reference_script=(
            result.trainer.script.sha256 == export.reference_script.sha256
            if result is not None
            else None
        ),
    )


def _check_sft(root: str, export: ExportManifest) -> None:
    data = export.data
    selection = data.sft_selection
    assert selection is not None  # the manifest model requires it for task sft
    receipt_path = os.path.join(root, "sft_ingestion.json")
    receipt = read_sft_ingestion(
        read_identified(root, selection.ingestion_receipt, MAX_SFT_RECEIPT_BYTES),
        source=receipt_path,
    )
    pairs = (
        ("invalid_row_policy", receipt.invalid_row_policy, selection.invalid_row_policy),
        ("rows_read", receipt.rows_read, selection.rows_read),
        ("rows_kept", receipt.rows_kept, selection.rows_kept),
        ("rows_rejected", receipt.rows_rejected, selection.rows_rejected),
        ("kept_corpus_sha256", receipt.kept_corpus_sha256, selection.kept_corpus_sha256),
        ("source", receipt.source, data.source_name),
    )
    for name, left, right in pairs:
        if left != right:
            raise HfIdentityMismatch(
                f"sft_ingestion.json {name} differs from the export's sft_selection",
                path=receipt_path,
            )
    dataset_path = os.path.join(root, "train.jsonl")
    count = 0
    for number, line in _lines(root, data.dataset, MAX_SFT_ROW_BYTES):
        try:
            example = validate_record(SftExample, loads(line[:-1], max_bytes=MAX_SFT_ROW_BYTES))
        except KilnError as exc:
            raise exc.at(path=dataset_path, line=number) from None
        if sft_row_bytes(example) != line:
            raise RecordInvalid(
                "the row is not the compact struct-order JSON of its example",
                path=dataset_path,
                line=number,
            )
        if (
            count >= len(receipt.kept_row_hashes)
            or str(sft_parsed_row_digest(example.to_json())) != receipt.kept_row_hashes[count]
        ):
            raise HfIdentityMismatch(
                "the row does not hash to its kept_row_hashes entry in sft_ingestion.json",
                path=dataset_path,
                line=number,
            )
        count += 1
    if count != data.row_count:
        raise HfIdentityMismatch(
            f"train.jsonl has {count} rows, the export declares {data.row_count}", path=dataset_path
        )
    template = read_identified(
        root, export.model.trl_training_chat_template, MAX_CHAT_TEMPLATE_BYTES
    )
    if not has_generation_blocks(template.decode("utf-8", "replace")):
        raise HfTrainingTemplateUnderivable(
            "training_chat_template.jinja has no {% generation %} ... {% endgeneration %} blocks",
            path=os.path.join(root, "training_chat_template.jinja"),
        )


def _lines(root: str, ident: FileIdentity, max_line: int) -> Iterator[tuple[int, bytes]]:
    """The LF-terminated rows of a declared file; at the end the bytes read must be the
    identity's (the rows checked are the rows hashed, issue 14.6)."""
    relative = ident.relative_path
    shown = os.path.join(root, relative)
    hasher = hashlib.sha256()
    size = 0
    with open_regular_beneath(root, relative) as fd, os.fdopen(os.dup(fd), "rb") as stream:
        number = 0
        while True:
            line = stream.readline(max_line + 1)
            if not line:
                if size != ident.size_bytes or "sha256:" + hasher.hexdigest() != ident.sha256:
                    raise _changed(shown)
                return
            hasher.update(line)
            size += len(line)
            number += 1
            if len(line) > max_line:
                raise RecordInvalid(
                    f"the row is longer than {max_line} bytes", path=shown, line=number
                )
            if not line.endswith(b"\n"):
                raise RecordInvalid("the last row lacks its LF", path=shown, line=number)
            yield number, line


@dataclass(frozen=True)
class GrpoScan:
    """Totals of a verified GRPO corpus (kiln-hf-trl-contract §4.8)."""

    row_count: int
    completion_count: int
    num_generations: int
    sampled_action_tokens: int
    forced_action_tokens: int
    max_sequence_tokens: int
    ordered_corpus_sha256: Sha256Digest


@dataclass(frozen=True)
class GrpoBinding:
    """The identities every GRPO completion must carry for one export (§4.7)."""

    served_model_id: str
    base_model_sha256: str
    tokenizer: dict[str, str]
    adapter: dict[str, str] | None

    @classmethod
    def of(cls, export: ExportManifest) -> GrpoBinding:
        model = export.model
        adapter = export.input_adapter
        return cls(
            served_model_id=model.served_model_id,
            base_model_sha256=model.base_weight_shard_manifest.aggregate_sha256,
            tokenizer={
                "vocab_sha256": model.tokenizer_vocab_sha256,
                "config_sha256": model.tokenizer.sha256,
                "chat_template_sha256": model.chat_template.sha256,
            },
            adapter=(
                None
                if adapter is None
                else behaviour_adapter(adapter.name, adapter.model, adapter.config)
            ),
        )


def behaviour_adapter(name: str, weights: FileIdentity, config: FileIdentity) -> dict[str, str]:
    """``{name, content_sha256}`` of an exported input adapter (§5.6)."""
    revision = adapter_content_revision(
        Sha256Digest.parse(weights.sha256), weights.size_bytes, Sha256Digest.parse(config.sha256)
    )
    return {"name": name, "content_sha256": "sha256:" + revision}


def check_grpo_group(group: GrpoGroup, binding: GrpoBinding) -> None:
    """A group's identities equal the export's: tokenizer (inference template), served
    model, base aggregate, and the input adapter's content revision or no adapter."""
    for completion in group.completions:
        provenance = completion.provenance
        if provenance.tokenizer.to_json() != binding.tokenizer:
            raise HfGrpoCorpusInvalid(
                "a completion's tokenizer identity is not the exported tokenizer and inference "
                "template"
            )
        policy = provenance.behavior_policy
        if policy.served_model_id != binding.served_model_id:
            raise HfGrpoCorpusInvalid("behavior_policy.served_model_id is not the exported model's")
        if policy.base_model_sha256 != binding.base_model_sha256:
            raise HfGrpoCorpusInvalid(
                "behavior_policy.base_model_sha256 is not the exported base aggregate"
            )
        got_adapter = policy.adapter.to_json() if policy.adapter is not None else None
        if got_adapter != binding.adapter:
            raise HfGrpoCorpusInvalid(
                "behavior_policy.adapter must be absent without an input adapter and equal "
                "the exported input adapter's content revision with one"
            )


def iter_grpo_file(path: str) -> Iterator[tuple[int, bytes, GrpoGroup]]:
    """Canonical rows of a GRPO JSONL file: (1-based line, row bytes without LF, group).

    Each row must be exactly ``grpo_row_bytes`` of the group it parses to; nothing is
    normalized. The file must be a regular non-link file of at most 64 GiB."""
    root, name = os.path.split(os.path.abspath(path))
    with open_regular_beneath(root, name) as fd:
        size = os.fstat(fd).st_size
        if not 0 < size <= MAX_GRPO_DATASET_BYTES:
            raise HfGrpoCorpusInvalid(
                f"the corpus is {size} bytes; it must hold 1 byte .. 64 GiB", path=path
            )
        with os.fdopen(os.dup(fd), "rb") as stream:
            number = 0
            while True:
                line = stream.readline(MAX_GRPO_ROW_BYTES + 1)
                if not line:
                    return
                number += 1
                if len(line) > MAX_GRPO_ROW_BYTES or not line.endswith(b"\n"):
                    raise HfGrpoCorpusInvalid(
                        "the row is longer than MAX_GRPO_ROW_BYTES or lacks its LF",
                        path=path,
                        line=number,
                    )
                try:
                    group = parse_grpo_group(
                        loads(line[:-1], max_bytes=MAX_GRPO_ROW_BYTES), line=number
                    )
                except KilnError as exc:
                    raise exc.at(path=path, line=number) from None
                if grpo_row_bytes(group) != line:
                    raise HfGrpoCorpusInvalid(
                        "the row is not the canonical compact serialization of its group",
                        path=path,
                        line=number,
                        hint="write rows with kiln_verify.hf.manifest.grpo_row_bytes",
                    )
                yield number, line[:-1], group


def scan_grpo_corpus(
    path: str | os.PathLike[str],
    binding: GrpoBinding | None = None,
    *,
    totals: ExportManifest | None = None,
    replay: TokenReplay | None = None,
) -> GrpoScan:
    """Stream-verify a GRPO corpus: canonical rows, 1..10,000,000 groups, one width, one
    behaviour policy, identities equal to ``binding`` (when given), every group's tokens
    replayed through the exported tokenizer and template (``replay``, when given; the
    export writer and :func:`verify_bundle` always give it) and the row count and ordered
    corpus digest ``totals`` declares (when given)."""
    shown = os.fspath(path)
    hasher = GrpoCorpusHasher()
    width = 0
    policy: dict[str, Any] | None = None
    completions = sampled = forced = longest = 0
    for number, row, group in iter_grpo_file(shown):
        if hasher.count >= MAX_GRPO_GROUPS:
            raise HfGrpoCorpusInvalid("more than MAX_GRPO_GROUPS groups", path=shown, line=number)
        if width and len(group.completions) != width:
            raise HfGrpoCorpusInvalid(
                f"the group has {len(group.completions)} completions, earlier groups {width} "
                "(one uniform width is required)",
                path=shown,
                line=number,
            )
        width = len(group.completions)
        for completion in group.completions:
            this = completion.provenance.behavior_policy.to_json()
            if policy is None:
                policy = this
            elif this != policy:
                raise HfGrpoCorpusInvalid(
                    "the corpus mixes behaviour-policy identities", path=shown, line=number
                )
            for token in completion.provenance.action_tokens:
                if token.source == "sampled":
                    sampled += 1
                else:
                    forced += 1
            longest = max(longest, len(completion.provenance.input_token_ids))
        completions += width
        if binding is not None:
            try:
                check_grpo_group(group, binding)
            except KilnError as exc:
                raise exc.at(path=shown, line=number) from None
        if replay is not None:
            try:
                replay.check_group(group)
            except KilnError as exc:
                raise exc.at(path=shown, line=number) from None
        hasher.update(row)
    if hasher.count == 0:
        raise HfGrpoCorpusInvalid("the corpus has no groups", path=shown)
    digest = hasher.digest()
    if totals is not None:
        if hasher.count != totals.data.row_count:
            raise HfIdentityMismatch(
                f"train.jsonl has {hasher.count} groups, the export declares "
                f"{totals.data.row_count}",
                path=shown,
            )
        if str(digest) != totals.data.ordered_corpus_sha256:
            raise HfIdentityMismatch(
                "ordered_corpus_sha256 is not the kiln.hf-trl-grpo-corpus.v1 digest of train.jsonl",
                path=shown,
            )
    return GrpoScan(hasher.count, completions, width, sampled, forced, longest, digest)


def _declare_export(data: bytes) -> dict[str, int]:
    return {ident.relative_path: ident.size_bytes for ident in export_identities(read_export(data))}


def _declare_result(data: bytes) -> dict[str, int]:
    result = read_result(data)
    return {ident.relative_path: ident.size_bytes for ident in _result_identities(result)}


def bundle_rules(*, completed: bool) -> DeclaredMembers:
    """What a ``NAME.kiln-hf.tar.gz`` may hold, checked at each member's header
    (:mod:`kiln_verify.hf.archive_rules`): the export's files, and with ``completed`` the
    four result files, each as large as its manifest declares."""
    sides = [Side(EXPORT_MANIFEST, EXPORT_FILES, _declare_export)]
    if completed:
        sides.append(Side(RESULT_MANIFEST, frozenset(RESULT_FILES), _declare_result))
    limit = ("MAX_MANIFEST_BYTES", MAX_MANIFEST_BYTES)

    def extra_hint(name: str) -> str | None:
        if not completed and name in RESULT_FILES:
            return "this is a completed bundle; verify it with --completed"
        return None

    def missing_hint(name: str) -> str | None:
        if name == RESULT_MANIFEST:
            return "this bundle has not been trained yet: run its train.py first"
        return None

    return DeclaredMembers(
        tuple(sides),
        caps={EXPORT_MANIFEST: limit, RESULT_MANIFEST: limit},
        what="a completed bundle" if completed else "a pristine bundle",
        extra_hint=extra_hint,
        missing_hint=missing_hint,
    )


def verify_archive(
    archive: str | os.PathLike[str],
    *,
    completed: bool = False,
    scratch_parent: str | os.PathLike[str] | None = None,
) -> BundleReport:
    """Extract ``NAME.kiln-hf.tar.gz`` into a private temporary directory (inside
    ``scratch_parent``, default the system's) and verify it.

    Extraction follows :func:`bundle_rules`, so nothing the manifests do not declare, and
    nothing larger than declared, is ever written."""
    root_name = bundle_name(archive)
    with (
        tempfile.TemporaryDirectory(prefix=".kiln-hf-verify-", dir=scratch_parent) as scratch,
        extracted_tar_gz(
            archive, scratch, expected_root=root_name, rules=bundle_rules(completed=completed)
        ) as extracted,
    ):
        return verify_bundle(extracted, completed=completed)


def verify_path(path: str | os.PathLike[str], *, completed: bool = False) -> BundleReport:
    """An archive (a file) or a bundle directory."""
    shown = os.fspath(path)
    if os.path.isdir(shown):
        return verify_bundle(shown, completed=completed)
    if not os.path.exists(shown):
        raise UsageError("no such file or directory", path=shown)
    return verify_archive(Path(shown), completed=completed)
