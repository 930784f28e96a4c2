"""Archive budgets hold before bytes hit the disk (issue 14, part 4).

Every hostile archive here is derived from a real export (the tiny model's SFT bundle, and
an import envelope of it completed without training) and extracted with the rules
``hf verify`` / ``hf verify-import`` use. For each case the test asserts the exact code,
that nothing is left under the extraction parent, and how many bytes extraction wrote
(every write goes through ``safe_tar._write_all``, counted here): never more than the
legitimate bundle, and nothing at all when the member that cannot belong is refused in the
dry first pass. Classes: zero-filled compressed bombs under every name and position,
duplicated members, undeclared large members (generated names), plus one 1 GiB bomb and
one resealed manifest that declares a bigger file (written bytes stay within what the
manifest declares).
"""

from __future__ import annotations

import os
import shutil
import string
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.core import safe_tar
from kiln_verify.core.digest import identify
from kiln_verify.core.safe_tar import ArchiveLimits, MemberRules, extract_tar_gz
from kiln_verify.errors import KilnError
from kiln_verify.hf.bundle_files import EXPORT_FILES, RESULT_FILES
from kiln_verify.hf.envelope import (
    _CAPS,
    IMPORT_ARCHIVE_LIMITS,
    envelope_rules,
    verify_envelope_archive,
    write_envelope_archive,
)
from kiln_verify.hf.manifest import FileIdentity, document_bytes, read_export
from kiln_verify.hf.verify import bundle_rules, verify_hf_path
from kiln_verify.limits import MAX_IMPORT_ARTIFACT_BYTES
from tests.hf.export.archive_kit import Member, bundle_members, tar_gz
from tests.hf.export.kit import complete_bundle

ROOT = "b.kiln-hf"
BOMB = 64 << 20  # declared bytes of each generated bomb member (its gzip is ~70 KB)
GIANT = 1 << 30
_ENVELOPE_CAPS = {name: bound for name, (_, bound) in _CAPS.items()}
TALLY: Counter[str] = Counter()
LAST: dict[str, float] = {}
"""Per class: cases tried, and refused with the expected code (printed at the end)."""


class Writes:
    """Counts every byte extraction writes (patched for the whole module)."""

    def __init__(self) -> None:
        self.total = 0
        self._real = safe_tar._write_all

    def __call__(self, fd: int, data: bytes) -> None:
        self.total += len(data)
        self._real(fd, data)


@pytest.fixture(scope="module")
def writes() -> Iterator[Writes]:
    counter = Writes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(safe_tar, "_write_all", counter)
        yield counter


@pytest.fixture(scope="module")
def legit(exported: Path) -> list[Member]:
    return bundle_members(exported, ROOT)


def _size(members: list[Member]) -> int:
    return sum(m.size for m in members)


def _refused(
    tmp_path: Path,
    writes: Writes,
    members: list[Member],
    *,
    rules: MemberRules,
    limits: ArchiveLimits = safe_tar.DEFAULT_LIMITS,
    root: str = ROOT,
    archive_name: str = ROOT + ".tar.gz",
) -> tuple[str, int]:
    """Extract; return (code, bytes written); nothing may remain."""
    work = tmp_path / f"case{sum(TALLY.values())}"
    dest = work / "dest"
    dest.mkdir(parents=True)
    archive = work / archive_name
    archive.write_bytes(tar_gz(members))
    writes.total = 0
    started = time.perf_counter()
    with pytest.raises(KilnError) as caught:
        extract_tar_gz(archive, dest, expected_root=root, limits=limits, rules=rules)
    LAST["seconds"] = time.perf_counter() - started
    LAST["archive"] = archive.stat().st_size
    assert os.listdir(dest) == []
    shutil.rmtree(work)
    return caught.value.code, writes.total


def _tally(kind: str, code: str, expected: str) -> None:
    TALLY[kind + " tried"] += 1
    assert code == expected, (kind, code)
    TALLY[kind + " refused"] += 1


def _positions(legit: list[Member]) -> dict[str, int]:
    """Where an inserted member goes: first after the root, at its sorted place, last."""
    return {"first": 1, "sorted": -1, "last": len(legit)}


def _insert(legit: list[Member], member: Member, where: str) -> list[Member]:
    out = list(legit)
    index = _positions(legit)[where]
    if index < 0:
        index = next((i for i, m in enumerate(out) if m.name > member.name), len(out))
    out.insert(index, member)
    return out


def test_legitimate_archive_writes_exactly_its_files(
    legit: list[Member], tmp_path: Path, writes: Writes
) -> None:
    archive = tmp_path / (ROOT + ".tar.gz")
    archive.write_bytes(tar_gz(legit))
    writes.total = 0
    assert verify_hf_path(archive).kind == "pristine"
    assert writes.total == _size(legit)
    print(f"\nlegitimate bundle: {_size(legit)} bytes in {len(legit)} entries")


def _bomb_cases(legit: list[Member]) -> Iterator[tuple[str, list[Member], str]]:
    present = {m.name.removeprefix(ROOT + "/") for m in legit}
    names = [*sorted(EXPORT_FILES | set(RESULT_FILES)), "zeros.bin", "input_adapter/x.bin"]
    for name in names:
        if name == "kiln_hf_export.json":
            expected = "limit_exceeded"  # above MAX_MANIFEST_BYTES whatever the manifest says
        elif name in present:
            expected = "size_mismatch"
        else:
            expected = "hf_bundle_extra_file"
        bomb = Member(f"{ROOT}/{name}", zeros=BOMB)
        base = [m for m in legit if m.name != bomb.name]
        for where in ("first", "sorted", "last"):
            yield f"{name}@{where}", _insert(base, bomb, where), expected


@pytest.mark.slow
def test_compressed_bombs_under_every_name_and_position(
    legit: list[Member], tmp_path: Path, writes: Writes
) -> None:
    worst = 0
    for label, members, expected in _bomb_cases(legit):
        code, written = _refused(tmp_path, writes, members, rules=bundle_rules(completed=False))
        _tally("bomb", code, expected)
        assert written <= _size(legit), label
        worst = max(worst, written)
    print(f"\nbombs ({BOMB} bytes each): worst case wrote {worst} of {_size(legit)} bytes")


@pytest.mark.slow
def test_a_one_gib_bomb_writes_nothing(legit: list[Member], tmp_path: Path, writes: Writes) -> None:
    """The issue's case: a small archive that expands to gigabytes. Before the manifest
    (the dry pass inflates it without writing) and after it (refused at its header)."""
    for name, where, expected in (
        ("train.jsonl", "first", "size_mismatch"),
        ("zeros.bin", "first", "hf_bundle_extra_file"),
        ("zeros.bin", "sorted", "hf_bundle_extra_file"),
    ):
        base = [m for m in legit if m.name != f"{ROOT}/{name}"]
        members = _insert(base, Member(f"{ROOT}/{name}", zeros=GIANT), where)
        code, written = _refused(tmp_path, writes, members, rules=bundle_rules(completed=False))
        _tally("giant bomb", code, expected)
        # Refused in the dry pass (nothing written), or at its header in the second pass
        # after the legitimate members before it.
        index = next(i for i, m in enumerate(members) if m.name == f"{ROOT}/{name}")
        assert written == (0 if where == "first" else _size(members[:index]))
        print(
            f"\n{GIANT}-byte bomb {name}@{where}: archive {LAST['archive']:.0f} bytes, "
            f"wrote {written}, refused in {LAST['seconds']:.2f} s"
        )


def _duplicate_code(members: list[Member], index: int, first: Member, again: Member) -> str:
    """A same-size duplicate passes the rules and is a duplicate name; a bigger one is
    refused by size first, once its manifest has been read (a manifest: by its cap)."""
    if again.size == first.size:
        return "archive_duplicate"
    if first.name == f"{ROOT}/kiln_hf_export.json":
        return "limit_exceeded"
    manifest = next(i for i, m in enumerate(members) if m.name.endswith("/kiln_hf_export.json"))
    return "size_mismatch" if index > manifest else "archive_duplicate"


def test_duplicated_members(legit: list[Member], tmp_path: Path, writes: Writes) -> None:
    worst = 0
    for member in legit[1:]:
        variants = [member]
        if member.size:
            variants.append(Member(member.name, zeros=member.size))  # same size, other bytes
            variants.append(Member(member.name, zeros=BOMB))
        for variant in variants:
            for where in ("next", "last"):
                members = list(legit)
                index = members.index(member) + 1 if where == "next" else len(members)
                members.insert(index, variant)
                code, written = _refused(
                    tmp_path, writes, members, rules=bundle_rules(completed=False)
                )
                _tally("duplicate", code, _duplicate_code(members, index, member, variant))
                assert written <= _size(legit)
                worst = max(worst, written)
    print(f"\nduplicates: worst case wrote {worst} of {_size(legit)} bytes")


_NAME = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=24).filter(
    lambda s: s not in (".", "..")
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(_NAME, min_size=1, max_size=3),
    size=st.integers(1, BOMB),
    where=st.sampled_from(["first", "sorted", "last"]),
)
def test_undeclared_large_members(
    legit: list[Member],
    tmp_path: Path,
    writes: Writes,
    parts: list[str],
    size: int,
    where: str,
) -> None:
    relative = "/".join(parts)
    present = {m.name.removeprefix(ROOT + "/") for m in legit}
    if relative in EXPORT_FILES | set(RESULT_FILES) or any(
        p == relative or p.startswith(relative + "/") or relative.startswith(p + "/")
        for p in present
    ):
        return  # a declared name or a clash with one: other classes cover those
    members = _insert(legit, Member(f"{ROOT}/{relative}", zeros=size), where)
    code, written = _refused(tmp_path, writes, members, rules=bundle_rules(completed=False))
    _tally("undeclared", code, "hf_bundle_extra_file")
    assert written <= _size(legit)


def test_a_resealed_manifest_bounds_what_is_written(
    exported: Path, tmp_path: Path, writes: Writes
) -> None:
    """A manifest re-sealed to declare a 16 MiB ``train.jsonl`` of zeros is self-consistent
    up to the data checks: extraction writes what it declares, and not a byte more."""
    bundle = Path(shutil.copytree(exported, tmp_path / ROOT))
    (bundle / "train.jsonl").write_bytes(bytes(16 << 20))
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    dataset = FileIdentity.from_artifact(identify(bundle, "train.jsonl", max_bytes=1 << 30))
    data = export.data.model_copy(update={"dataset": dataset})
    forged = export.model_copy(update={"data": data}).sealed()
    (bundle / "kiln_hf_export.json").write_bytes(document_bytes(forged))
    members = bundle_members(bundle, ROOT)
    archive = tmp_path / "arch" / (ROOT + ".tar.gz")
    archive.parent.mkdir()
    archive.write_bytes(tar_gz(members))
    writes.total = 0
    with pytest.raises(KilnError) as caught:
        verify_hf_path(archive)
    assert caught.value.code == "record_invalid"
    assert writes.total == _size(members)
    members.append(Member(f"{ROOT}/train.jsonl", zeros=BOMB))  # and a duplicate on top
    code, written = _refused(tmp_path, writes, members, rules=bundle_rules(completed=False))
    _tally("resealed", code, "size_mismatch")
    assert written <= _size(members) - BOMB


@pytest.fixture(scope="module")
def envelope(exported: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Member]:
    work = tmp_path_factory.mktemp("envelope")
    bundle = Path(shutil.copytree(exported, work / ROOT))
    complete_bundle(bundle)
    outcome = write_envelope_archive(bundle, "env", work / "env.kiln-hf-import.tar.gz")
    root = work / "unpacked"
    root.mkdir()
    extracted = extract_tar_gz(
        outcome.archive, root, expected_root="env.kiln-hf-import", limits=IMPORT_ARCHIVE_LIMITS
    )
    return bundle_members(extracted, "env.kiln-hf-import")


def test_envelope_archives(envelope: list[Member], tmp_path: Path, writes: Writes) -> None:
    root = "env.kiln-hf-import"
    legit_size = _size(envelope)
    archive = tmp_path / (root + ".tar.gz")
    archive.write_bytes(tar_gz(envelope))
    writes.total = 0
    assert verify_envelope_archive(archive).export.task == "sft"
    assert writes.total == legit_size
    extract: Callable[[list[Member]], tuple[str, int]] = lambda members: _refused(  # noqa: E731
        tmp_path,
        writes,
        members,
        rules=envelope_rules(),
        limits=IMPORT_ARCHIVE_LIMITS,
        root=root,
        archive_name=root + ".tar.gz",
    )
    names = [m.name for m in envelope[1:]]
    worst = 0
    for name in [*names, f"{root}/train.jsonl", f"{root}/zeros.bin"]:
        relative = name.removeprefix(root + "/")
        base = [m for m in envelope if m.name != name]
        for where in ("first", "sorted", "last"):
            code, written = extract(_insert(base, Member(name, zeros=BOMB), where))
            if name not in names:
                expected = "hf_bundle_extra_file"
            elif _ENVELOPE_CAPS.get(relative, MAX_IMPORT_ARTIFACT_BYTES) < BOMB:
                expected = "limit_exceeded"
            else:
                expected = "size_mismatch"
            _tally("envelope bomb", code, expected)
            worst = max(worst, written)
    for member in envelope[1:]:
        members = [*envelope, member]
        code, written = extract(members)
        _tally("envelope duplicate", code, "archive_duplicate")
        worst = max(worst, written)
    assert worst <= legit_size
    print(f"\nenvelope: {legit_size} bytes; hostile cases wrote at most {worst}")


def test_zz_tally() -> None:
    """Print the per-class figures (run with -s); every tried case was refused."""
    print("\n" + ", ".join(f"{key}: {value}" for key, value in sorted(TALLY.items())))
    for key in [k for k in TALLY if k.endswith(" tried")]:
        assert TALLY[key] == TALLY[key.replace(" tried", " refused")]
