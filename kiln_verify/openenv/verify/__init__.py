"""Offline verification of an OpenEnv rollout bundle (kiln-openenv-contract §6).

=====================  ==========================================================
module                 job
=====================  ==========================================================
``files``              §6.2 path resolution, bounded reads, hashing while streaming
``replay_checks``      §6.5 the replay manifest on its own, return recomputation
``cross``              §6.6-§6.8 summary ↔ replay, reset plan, group plan, prompts
``candidates``         §6.9 provenance, trajectory and summary record per candidate
``stats``              §6.10 statistics recomputation
``observer``           what a report may watch: each candidate once it passed
``engine``             orchestration: :func:`verify_bundle` → ``VerificationReport``
=====================  ==========================================================

Network-free: nothing here imports the OpenEnv client or any socket code.
"""

from __future__ import annotations

from kiln_verify.openenv.verify.engine import (
    VerifiedBundle,
    verify_bundle,
    verify_bundle_digests,
)

__all__ = ["VerifiedBundle", "verify_bundle", "verify_bundle_digests"]
