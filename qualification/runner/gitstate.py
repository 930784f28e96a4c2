"""What the receipt binds in git: a clean tree, the commit, and the source-tree hash.

The tree hash (format ``kiln-verify-source-tree-v1``) is computed from a commit's objects,
not from the checkout, so ``--check`` can recompute it for any commit the repository has:

    entries = `git ls-tree -r -z --full-tree COMMIT`, minus every path under
              qualification/receipts/, sorted by path bytes
    hash    = sha256( b"kiln-verify-source-tree-v1\\0"
                      + for each entry: MODE \\0 PATH \\0 LEN \\0 HEX_SHA256(CONTENT) \\0 )

CONTENT is the blob's bytes (a symlink's target text for mode 120000, the commit id text
for a submodule). Receipts are excluded so that committing a receipt does not change the
hash of the tree that produced it.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from .common import Refusal

TREE_HASH_FORMAT = "kiln-verify-source-tree-v1"
RECEIPTS_PREFIX = "qualification/receipts/"


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False
    )
    if result.returncode != 0:
        message = result.stderr.decode(errors="replace").strip()[:500]
        raise Refusal("git", f"git {' '.join(args)} failed: {message}", "run inside a git checkout")
    return result.stdout


def dirty_paths(repo: Path) -> list[str]:
    out = git(repo, "status", "--porcelain", "--untracked-files=all")
    return [line for line in out.decode(errors="replace").splitlines() if line]


def require_clean(repo: Path) -> None:
    dirty = dirty_paths(repo)
    if dirty:
        shown = ", ".join(repr(line) for line in dirty[:5])
        more = f" and {len(dirty) - 5} more" if len(dirty) > 5 else ""
        raise Refusal(
            "dirty-tree",
            f"the working tree is not clean ({shown}{more})",
            "commit or remove every change (git status --porcelain --untracked-files=all"
            " must print nothing)",
        )


def head_commit(repo: Path) -> str:
    return git(repo, "rev-parse", "--verify", "HEAD^{commit}").decode().strip()


def has_commit(repo: Path, commit: str) -> bool:
    result = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True, check=False,
    )  # fmt: skip
    return result.returncode == 0


def committed_bytes(repo: Path, commit: str, relpath: str) -> bytes | None:
    """The file's bytes at ``commit``, or None when it is not committed there."""
    result = subprocess.run(
        ["git", "-C", str(repo), "show", f"{commit}:{relpath}"], capture_output=True, check=False
    )
    return result.stdout if result.returncode == 0 else None


def tree_hash(repo: Path, commit: str) -> tuple[str, int]:
    """(``sha256:<hex>``, number of files) of ``commit`` under the format above."""
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries: list[tuple[bytes, bytes, bytes, bytes]] = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, oid = meta.split(b" ")
        if path.startswith(RECEIPTS_PREFIX.encode()):
            continue
        entries.append((path, mode, kind, oid))
    entries.sort()
    blobs = [oid for _, _, kind, oid in entries if kind == b"blob"]
    contents = _blob_contents(repo, blobs)
    digest = hashlib.sha256(TREE_HASH_FORMAT.encode() + b"\0")
    for path, mode, kind, oid in entries:
        content = contents[oid] if kind == b"blob" else oid
        digest.update(mode + b"\0" + path + b"\0" + str(len(content)).encode() + b"\0")
        digest.update(hashlib.sha256(content).hexdigest().encode() + b"\0")
    return "sha256:" + digest.hexdigest(), len(entries)


def _blob_contents(repo: Path, oids: list[bytes]) -> dict[bytes, bytes]:
    unique = sorted(set(oids))
    out = git(repo, "cat-file", "--batch", stdin=b"".join(oid + b"\n" for oid in unique))
    contents: dict[bytes, bytes] = {}
    at = 0
    for oid in unique:
        header_end = out.index(b"\n", at)
        header = out[at:header_end].split(b" ")
        if header[0] != oid or len(header) != 3:
            raise Refusal("git", f"git cat-file answered {header!r} for {oid!r}", "check the repo")
        size = int(header[2])
        contents[oid] = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
    return contents
