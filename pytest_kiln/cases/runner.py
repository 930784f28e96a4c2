"""Running a case: the check's outcome becomes a verdict according to the case's level."""

from __future__ import annotations

import asyncio
import contextlib
import time

from pytest_kiln.cases.case import Case
from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.model import (
    CASE_TIMEOUT_S,
    DEFAULT_CAPACITY_PROBE,
    FAILURE_VERDICT,
    CaseResult,
    CheckFailed,
    NotApplicable,
    Verdict,
    describe,
)


async def run_case_async(
    case: Case, url: str, *, credential_env: str | None = None, timeout: float = CASE_TIMEOUT_S,
    capacity_probe: int = DEFAULT_CAPACITY_PROBE,
) -> CaseResult:
    started = time.monotonic()
    ctx = CaseContext(url, credential_env=credential_env, capacity_probe=capacity_probe)
    failed = FAILURE_VERDICT[case.level]
    verdict = Verdict.OK
    detail = ""
    try:
        async with asyncio.timeout(timeout):
            detail = await case.check(ctx) or ""
    except NotApplicable as exc:
        verdict, detail = Verdict.SKIPPED, str(exc)
    except CheckFailed as exc:
        verdict, detail = failed, str(exc)
    except TimeoutError:
        verdict, detail = failed, f"the case took over {timeout:g} s"
    except Exception as exc:  # a client error the check did not anticipate
        verdict, detail = failed, describe(exc)
    finally:
        with contextlib.suppress(Exception):
            await ctx.aclose()
    measurements = dict(ctx.measurements)
    if ctx.capacity_retries:
        measurements["capacity_retries"] = ctx.capacity_retries
    return CaseResult(case.id, case.level, case.clause, verdict, ctx.redact(detail),
                      time.monotonic() - started, measurements)


def run_case(
    case: Case, url: str, *, credential_env: str | None = None, timeout: float = CASE_TIMEOUT_S,
    capacity_probe: int = DEFAULT_CAPACITY_PROBE,
) -> CaseResult:
    """Run one case on a fresh event loop (pytest-asyncio is not needed)."""
    return asyncio.run(run_case_async(case, url, credential_env=credential_env, timeout=timeout,
                                      capacity_probe=capacity_probe))
