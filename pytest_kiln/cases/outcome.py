"""One black-box case run to its verdict: shared by the HTTP suites (control plane, HF/TRL
hand-off), whose cases are a check over a context that holds the suite's connections."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pytest_kiln.cases.model import (
    FAILURE_VERDICT,
    CaseResult,
    CheckFailed,
    Level,
    NotApplicable,
    Verdict,
    describe,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["CheckedCase", "Closable", "answer_json", "run_checked"]


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)
C_contra = TypeVar("C_contra", bound=Closable, contravariant=True)


class CheckedCase(Protocol[C_contra]):
    @property
    def id(self) -> str: ...
    @property
    def level(self) -> Level: ...
    @property
    def clause(self) -> str: ...
    @property
    def check(self) -> Callable[[C_contra], str | None]: ...


def run_checked(case: CheckedCase[C], ctx: C) -> CaseResult:
    """The case's verdict by its level; ``ctx`` is closed whatever happened."""
    started = time.monotonic()
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


def answer_json(response: httpx.Response) -> Any:
    """The answer's JSON document, or the check fails naming the request."""
    try:
        return response.json()
    except ValueError:
        raise CheckFailed(
            f"{response.request.method} {response.request.url.path} answered non-JSON "
            f"(status {response.status_code})"
        ) from None
