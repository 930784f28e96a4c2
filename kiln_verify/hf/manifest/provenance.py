"""Execution provenance ``kiln.execution-provenance.v1`` (kiln-hf-trl-contract §4.3).

Same keys, order and digest rules as Kiln's ``ExecutionProvenanceV1``, so a Kiln reader
accepts ours. Its two digests are *not* the canonical manifest digest:

* ``kernels.contract_sha256`` = SHA-256 of the compact JSON array
  ``["kiln.kernel-contract.v1", {versions, keys sorted}, [features]]``;
* ``provenance_sha256`` = SHA-256 of the compact JSON of every other field in struct order.

What kiln-verify records (:meth:`ExecutionProvenance.for_this_process`): the backend is the
Python implementation on this machine, ``build`` names the kiln-verify version, the
platform tag and the digest of the Python executable, ``kernels.versions`` holds the
kiln-verify and Python versions, and ``model`` holds the exported model file identities
(cross-checked against the export manifest, §4.1).
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from collections.abc import Mapping
from itertools import pairwise
from typing import Annotated, Any, Final, Literal, Self

from pydantic import Field, PlainSerializer, StrictBool, model_validator

from kiln_verify._version import __version__
from kiln_verify.core.digest import Sha256Digest, canonical_digest, hash_file, sha256_bytes
from kiln_verify.core.jsonio import dumps_compact
from kiln_verify.hf.manifest.fields import BoundedText, Sha256
from kiln_verify.limits import MAX_KERNEL_VERSIONS, MAX_MODEL_FILE_BYTES
from kiln_verify.records import Record, sort_keys

__all__ = [
    "EXECUTION_PROVENANCE",
    "KERNEL_CONTRACT",
    "BackendProvenance",
    "BuildProvenance",
    "ConfigurationProvenance",
    "ExecutionProvenance",
    "KernelContract",
    "ModelProvenance",
    "PrecisionProvenance",
]

EXECUTION_PROVENANCE: Final = "kiln.execution-provenance.v1"
KERNEL_CONTRACT: Final = "kiln.kernel-contract.v1"


class BackendProvenance(Record):
    name: BoundedText
    device: BoundedText
    numerical_runtime_sha256: Sha256


class BuildProvenance(Record):
    _omit_when_none = frozenset({"git_commit", "source_tree_sha256", "source_dirty"})

    package_version: BoundedText
    target: BoundedText
    executable_sha256: Sha256
    git_commit: BoundedText | None = None
    source_tree_sha256: Sha256 | None = None
    source_dirty: StrictBool | None = None


class ModelProvenance(Record):
    _omit_when_none = frozenset({"chat_template_sha256", "training_chat_template_sha256"})

    model_config_sha256: Sha256
    tokenizer_vocab_sha256: Sha256
    tokenizer_config_sha256: Sha256
    chat_template_sha256: Sha256 | None = None
    training_chat_template_sha256: Sha256 | None = None


class PrecisionProvenance(Record):
    inference_dtype: BoundedText
    training_policy: BoundedText


KernelVersions = Annotated[
    dict[BoundedText, BoundedText],
    Field(min_length=1, max_length=MAX_KERNEL_VERSIONS),
    PlainSerializer(sort_keys),
]


class KernelContract(Record):
    """``kiln.kernel-contract.v1``: kernel versions (sorted keys) and compiled features."""

    contract_type: Literal["kiln.kernel-contract.v1"] = KERNEL_CONTRACT
    versions: KernelVersions
    compiled_features: list[BoundedText] = Field(max_length=MAX_KERNEL_VERSIONS)
    contract_sha256: Sha256

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        features = self.compiled_features
        if any(left >= right for left, right in pairwise(features)):
            raise ValueError("compiled_features must be sorted and unique")
        if self.contract_sha256 != str(kernel_contract_digest(self.versions, features)):
            raise ValueError("contract_sha256 is not the digest of the kernel contract")
        return self

    @classmethod
    def create(cls, versions: Mapping[str, str], features: list[str]) -> KernelContract:
        ordered = sorted(set(features))
        return cls(
            versions=dict(versions),
            compiled_features=ordered,
            contract_sha256=str(kernel_contract_digest(versions, ordered)),
        )


def kernel_contract_digest(versions: Mapping[str, str], features: list[str]) -> Sha256Digest:
    """SHA-256 of compact ``["kiln.kernel-contract.v1", {versions sorted}, [features]]``."""
    return sha256_bytes(dumps_compact([KERNEL_CONTRACT, sort_keys(dict(versions)), features]))


class ConfigurationProvenance(Record):
    effective_server_config_sha256: Sha256
    effective_environment_sha256: Sha256


class ExecutionProvenance(Record):
    """``kiln.execution-provenance.v1`` of the process that made an export."""

    schema_version: Literal[1] = 1
    provenance_type: Literal["kiln.execution-provenance.v1"] = EXECUTION_PROVENANCE
    backend: BackendProvenance
    build: BuildProvenance
    model: ModelProvenance
    precision: PrecisionProvenance
    kernels: KernelContract
    configuration: ConfigurationProvenance
    provenance_sha256: Sha256

    @model_validator(mode="after")
    def _digest(self) -> Self:
        if self.provenance_sha256 != str(provenance_digest(self.to_json())):
            raise ValueError("provenance_sha256 is not the digest of the other fields")
        return self

    @classmethod
    def create(cls, **fields: Any) -> ExecutionProvenance:
        """Build from every field but ``provenance_sha256`` and compute that digest."""
        draft = cls.model_construct(**fields, provenance_sha256="")
        return cls(**fields, provenance_sha256=str(provenance_digest(draft.to_json())))

    @classmethod
    def for_this_process(
        cls,
        model: ModelProvenance,
        *,
        inference_dtype: str,
        training_policy: str = "external-hf-trl",
        python_executable: str | None = None,
    ) -> ExecutionProvenance:
        """What kiln-verify records about itself: version, Python, platform, model files."""
        python = platform.python_version()
        implementation = platform.python_implementation()
        host = {"implementation": implementation, "python": python, "platform": platform.platform()}
        executable = hash_file(
            os.path.realpath(python_executable or sys.executable), max_bytes=MAX_MODEL_FILE_BYTES
        )
        return cls.create(
            backend=BackendProvenance(
                name=implementation.lower(),
                device=platform.machine() or "unknown",
                numerical_runtime_sha256=str(canonical_digest(host)),
            ),
            build=BuildProvenance(
                package_version=__version__,
                target=sysconfig.get_platform(),
                executable_sha256=str(executable.sha256),
            ),
            model=model,
            precision=PrecisionProvenance(
                inference_dtype=inference_dtype, training_policy=training_policy
            ),
            kernels=KernelContract.create(
                {"kiln-verify": __version__, "python": python}, []
            ),
            configuration=ConfigurationProvenance(
                effective_server_config_sha256=str(canonical_digest({})),
                effective_environment_sha256=str(canonical_digest(host)),
            ),
        )


def provenance_digest(document: Mapping[str, Any]) -> Sha256Digest:
    """SHA-256 of the compact struct-order JSON of ``document`` minus ``provenance_sha256``."""
    return sha256_bytes(
        dumps_compact({key: value for key, value in document.items() if key != "provenance_sha256"})
    )
