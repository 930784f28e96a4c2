"""Model identity: a content digest over every file of the model directory.

Format ``kiln-verify-model-content-v1``: the regular files under the directory (recursively,
symlinks refused), sorted by relative POSIX path bytes;
``sha256(b"kiln-verify-model-content-v1\\0" + for each: PATH \\0 SIZE \\0 HEX_SHA256 \\0)``.
Hashing every file (not only weights) binds the tokenizer, config and chat template too.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from .common import Refusal, sha256_file

FORMAT = "kiln-verify-model-content-v1"


def model_identity(directory: Path) -> dict[str, Any]:
    if directory.is_symlink() or not directory.is_dir():
        raise Refusal("model", f"{directory} is not a real directory", "pass a model directory")
    files: list[dict[str, Any]] = []
    for root, dirs, names in os.walk(directory):
        for name in [*dirs, *names]:
            if (Path(root) / name).is_symlink():
                raise Refusal("model", f"{Path(root) / name} is a symlink", "copy the real file")
        for name in names:
            path = Path(root) / name
            if not path.is_file():
                raise Refusal("model", f"{path} is not a regular file", "remove it")
            digest, size = sha256_file(path)
            files.append(
                {"path": path.relative_to(directory).as_posix(), "bytes": size, "sha256": digest}
            )
    if not files:
        raise Refusal("model", f"{directory} holds no files", "pass a model directory")
    files.sort(key=lambda item: item["path"].encode())
    total = hashlib.sha256(FORMAT.encode() + b"\0")
    for item in files:
        line = f"{item['path']}\0{item['bytes']}\0{item['sha256'].removeprefix('sha256:')}\0"
        total.update(line.encode())
    return {
        "content_format": FORMAT,
        "content_sha256": "sha256:" + total.hexdigest(),
        "files": files,
    }
