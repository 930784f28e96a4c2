"""Running an HF/TRL HTTP case: its outcome becomes a verdict by the case's level."""

from __future__ import annotations

import time

from pytest_kiln.cases.model import (
    FAILURE_VERDICT,
    CaseResult,
    CheckFailed,
    NotApplicable,
    Verdict,
    describe,
)
from pytest_kiln.hf_http.context import HfContext
from pytest_kiln.hf_http.inventory import HfCase

__all__ = ["run_hf_case"]


def run_hf_case(case: HfCase, url: str) -> CaseResult:
    started = time.monotonic()
    ctx = HfContext(url)
    verdict, detail = Verdict.OK, ""
    try:
        detail = case.check(ctx) or ""
    except NotApplicable as exc:
        verdict, detail = Verdict.SKIPPED, str(exc)
    except CheckFailed as exc:
        verdict, detail = FAILURE_VERDICT[case.level], str(exc)
    except Exception as exc:  # a transport error the check did not anticipate
        verdict, detail = FAILURE_VERDICT[case.level], describe(exc)
    finally:
        ctx.close()
    return CaseResult(
        case.id, case.level, case.clause, verdict, detail[:2000], time.monotonic() - started
    )
