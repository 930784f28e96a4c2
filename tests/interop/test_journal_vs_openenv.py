"""``--journal`` and ``--resume`` against an openenv 0.10.0 peer (a server nobody here wrote).

A journaled run writes each group once, for its entry and for the bundle; this checks that
the bundle it publishes is the bytes of a plain run of the same plan when the episodes come
from openenv's own server, and that a resume after a crash (the seal and the last entries
gone, a killed writer's staged file left) publishes the same bytes again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openenv")

from kiln_verify.openenv.collect.journal import SEAL, entry_name
from tests.openenv.collect.journals import (
    NAMES,
    controls_in,
    files_of,
    journaled,
    published,
    reference,
)

pytestmark = pytest.mark.interop

GROUPS = 4


@pytest.mark.parametrize("key", ["counter", "bandit"])
def test_a_journaled_run_and_its_resume_publish_the_plain_bytes(
    openenv_urls: dict[str, str], tmp_path: Path, key: str
) -> None:
    controls = controls_in(tmp_path, openenv_urls[key], groups=GROUPS)
    expected = files_of(reference(controls))
    journal = tmp_path / "journal"
    done, bundle = journaled(controls, journal)
    assert bundle is not None
    assert done.resumed == 0
    assert files_of(bundle) == expected == published(tmp_path)
    for name in NAMES:
        (tmp_path / name).unlink()
    (journal / SEAL).unlink()
    for index in (2, 3):
        (journal / entry_name(index)).unlink()
    (journal / f".{entry_name(2)}.partial").write_bytes(b"sha256:")
    done, bundle = journaled(controls, journal, resume=True)
    assert done.resumed == 2
    assert bundle is not None
    assert published(tmp_path) == expected
    assert not any(path.name.endswith(".partial") for path in journal.iterdir())
