"""The stage's two policies on a resident-model server: the behaviour adapter on the resident
model, the trained adapter from its completed bundle through the verified import into a
private scratch registry that is gone afterwards, and never into the servable set."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kinds.evaluation_stage import resident_policies
from kiln_verify.control.resident.serving import serves
from kiln_verify.control.resident.store import adapters_root
from kiln_verify.hf.importer import verify_installed


def test_the_candidate_is_loaded_beside_the_servable_set(
    resident: ServerConfig, completed: tuple[Path, Path], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    async def build() -> tuple[dict[str, object], dict[str, object], list[str]]:
        async with resident_policies(resident, "base", completed[1], "cand-v1", run_dir) as (
            baseline,
            candidate,
        ):
            scratch = [p.name for p in run_dir.iterdir()]
            (installed,) = [p for p in run_dir.rglob("cand-v1") if p.is_dir()]
            revision = verify_installed(installed).content_revision
            base_id = baseline.identity().to_dict()
            cand_id = candidate.identity().to_dict()
            adapter = {"name": "cand-v1", "content_sha256": "sha256:" + revision}
            assert cand_id["adapter"] == adapter
            return base_id, cand_id, scratch

    base_id, cand_id, scratch = asyncio.run(build())
    assert base_id.get("adapter") is None
    assert base_id["model_sha256"] == cand_id["model_sha256"]
    assert len(scratch) == 1
    assert scratch[0].startswith(".environment-eval-candidate-")
    assert list(run_dir.iterdir()) == []  # the scratch registry is removed
    assert not (adapters_root(resident) / "cand-v1").exists()
    assert not serves(resident, "cand-v1")
