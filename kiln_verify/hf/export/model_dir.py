"""The resident model's identity, read from a local Hugging Face model directory.

An export binds the model it was made from: every ``*.safetensors`` shard (name, size,
digest) with the ``kiln.base-model-content.v1`` aggregate, the model configuration, the
tokenizer bytes and vocabulary identity, and the inference chat template. The import
recomputes the same snapshot from its ``--model`` directory and requires equality.

The model directory is the operator's own input (a Hugging Face cache snapshot links its
files to blobs), so links inside it are followed; what is read must be a regular file. The
bundle side, by contrast, never follows a link.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kiln_verify.core.digest import Sha256Digest, canonical_digest, hash_file, sha256_bytes
from kiln_verify.core.jsonio import dumps_canonical, loads_object
from kiln_verify.errors import HfExportInvalid, KilnError
from kiln_verify.hf.manifest import BaseWeightShard, BaseWeightShardManifest
from kiln_verify.hf.manifest.shards import SHARD_FILENAME_PATTERN
from kiln_verify.limits import (
    MAX_BASE_SHARDS,
    MAX_CHAT_TEMPLATE_BYTES,
    MAX_MODEL_CONFIG_BYTES,
    MAX_MODEL_FILE_BYTES,
    MAX_TOKENIZER_BYTES,
)

__all__ = [
    "TOKENIZER_VOCAB",
    "ModelSnapshot",
    "tokenizer_vocab_digest",
]

TOKENIZER_VOCAB: Final = "kiln-verify.tokenizer-vocab.v1"
_SHARD_NAME = re.compile(SHARD_FILENAME_PATTERN)


def _read_model_file(directory: Path, name: str, max_bytes: int) -> bytes:
    path = directory / name
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        raise HfExportInvalid(f"the model directory has no {name}", path=str(path)) from None
    if not stat.S_ISREG(info.st_mode):
        raise HfExportInvalid(f"{name} is not a regular file", path=str(path))
    if info.st_size > max_bytes:
        raise HfExportInvalid(f"{name} is larger than {max_bytes} bytes", path=str(path))
    with open(real, "rb") as stream:
        data = stream.read(max_bytes + 1)
    if not data or len(data) > max_bytes:
        raise HfExportInvalid(f"{name} is empty or larger than {max_bytes} bytes", path=str(path))
    return data


def tokenizer_vocab_digest(tokenizer_json: bytes) -> Sha256Digest:
    """``tokenizer_vocab_sha256``: the token-id assignment of a ``tokenizer.json``.

    Kiln's own vocabulary hash is not public (kiln-hf-trl-contract §9); kiln-verify's is the
    canonical digest of ``{"schema": "kiln-verify.tokenizer-vocab.v1", "vocab": [[id,
    token], ...] sorted by id, "added_tokens": [[id, content, special], ...] sorted by id}``,
    so two tokenizers agree exactly when every id maps to the same token text.
    """
    doc = loads_object(tokenizer_json, max_bytes=MAX_TOKENIZER_BYTES, source="tokenizer.json")
    model = doc.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    pairs: list[list[Any]] = []
    if isinstance(vocab, dict):
        pairs = sorted([token_id, token] for token, token_id in vocab.items())
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], ids by position
        pairs = [[index, entry[0]] for index, entry in enumerate(vocab) if isinstance(entry, list)]
    else:
        raise HfExportInvalid("tokenizer.json has no model.vocab", path="tokenizer.json")
    added = sorted(
        [entry.get("id"), entry.get("content"), bool(entry.get("special"))]
        for entry in doc.get("added_tokens") or []
        if isinstance(entry, dict)
    )
    return canonical_digest({"schema": TOKENIZER_VOCAB, "vocab": pairs, "added_tokens": added})


@dataclass(frozen=True)
class ModelSnapshot:
    """Everything an export records about the resident model, with the exported bytes."""

    directory: Path
    served_model_id: str
    model_config: bytes
    """``kiln_model_config.json``: canonical (sorted-key, compact) JSON of ``config.json``."""
    tokenizer: bytes
    """``tokenizer.json``, byte for byte."""
    chat_template: bytes
    """The inference template (``chat_template.jinja`` or ``tokenizer_config.json``)."""
    vocab_sha256: Sha256Digest
    shards: BaseWeightShardManifest
    inference_dtype: str

    @classmethod
    def read(
        cls, directory: str | os.PathLike[str], *, served_model_id: str | None = None
    ) -> ModelSnapshot:
        root = Path(directory)
        if not root.is_dir():
            raise HfExportInvalid("--model is not a directory", path=str(root))
        config_bytes = _read_model_file(root, "config.json", MAX_MODEL_CONFIG_BYTES)
        config = loads_object(
            config_bytes, max_bytes=MAX_MODEL_CONFIG_BYTES, source=str(root / "config.json")
        )
        tokenizer = _read_model_file(root, "tokenizer.json", MAX_TOKENIZER_BYTES)
        template = cls._chat_template(root)
        names = sorted(
            entry.name for entry in os.scandir(root) if entry.name.endswith(".safetensors")
        )
        if not names:
            raise HfExportInvalid("the model directory has no *.safetensors shard", path=str(root))
        if len(names) > MAX_BASE_SHARDS:
            raise HfExportInvalid(
                f"more than {MAX_BASE_SHARDS} shards (MAX_BASE_SHARDS)", path=str(root)
            )
        shards = []
        for name in names:
            if not _SHARD_NAME.match(name):
                raise HfExportInvalid(
                    f"shard file name {name!r} is not 1..255 bytes of [A-Za-z0-9._-]",
                    path=str(root / name),
                )
            found = hash_file(os.path.realpath(root / name), max_bytes=MAX_MODEL_FILE_BYTES)
            if found.size_bytes == 0:
                raise HfExportInvalid("the shard is empty", path=str(root / name))
            shards.append(
                BaseWeightShard(
                    filename=name, size_bytes=found.size_bytes, sha256=str(found.sha256)
                )
            )
        dtype = config.get("dtype", config.get("torch_dtype"))
        served = served_model_id or config.get("_name_or_path") or root.resolve().name
        try:
            return cls(
                directory=root,
                served_model_id=str(served),
                model_config=dumps_canonical(config),
                tokenizer=tokenizer,
                chat_template=template,
                vocab_sha256=tokenizer_vocab_digest(tokenizer),
                shards=BaseWeightShardManifest.from_shards(shards),
                inference_dtype=dtype if isinstance(dtype, str) and dtype else "float32",
            )
        except KilnError as exc:
            if exc.path is None:
                exc.at(path=str(root))
            raise

    @staticmethod
    def _chat_template(root: Path) -> bytes:
        if (root / "chat_template.jinja").exists():
            return _read_model_file(root, "chat_template.jinja", MAX_CHAT_TEMPLATE_BYTES)
        if (root / "tokenizer_config.json").exists():
            raw = _read_model_file(root, "tokenizer_config.json", MAX_TOKENIZER_BYTES)
            value = loads_object(
                raw, max_bytes=MAX_TOKENIZER_BYTES, source=str(root / "tokenizer_config.json")
            )
            template = value.get("chat_template")
            if isinstance(template, str) and template:
                return template.encode("utf-8")
        raise HfExportInvalid(
            "the model has no chat template (chat_template.jinja or tokenizer_config.json)",
            path=str(root),
            hint="add the model's chat template as chat_template.jinja",
        )

    @property
    def model_config_sha256(self) -> Sha256Digest:
        return sha256_bytes(self.model_config)
