"""The control client: list, start, follow and cancel server-owned runs (contract §11).

Synchronous ``httpx`` with redirects never followed (a redirect could move the caller to
another origin), no proxy or ``.netrc`` from the environment, every JSON answer read
through a ``MAX_CONTROL_RESPONSE_BYTES`` cap, parsed by the strict reader and validated
as its record, so a server that answers something else is ``control_response_invalid``.
A refusal is ``control_http_status`` carrying the server's own ``error.code`` and hint.

:func:`load_run_request` is ``openenv start --request``: exactly one regular,
non-symlink file of at most ``MAX_CONTROL_REQUEST_BYTES`` holding one JSON object, into
which ``--idempotency-key`` is inserted (and which may not already disagree with it).
The server alone validates the request itself.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import httpx

from kiln_verify.control.status import OpenEnvRunStatus, RunList
from kiln_verify.core.jsonio import loads, loads_object
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import (
    ControlHttpStatus,
    ControlRedirect,
    ControlResponseInvalid,
    ControlTransport,
    ControlUrlInvalid,
    IdempotencyKeyDisagrees,
    KilnError,
    RunEndedUnsuccessfully,
    RunRequestFileInvalid,
    UsageError,
    snippet,
)
from kiln_verify.limits import (
    HTTP_CONNECT_TIMEOUT_S,
    HTTP_REQUEST_TIMEOUT_S,
    MAX_CONTROL_REQUEST_BYTES,
    MAX_CONTROL_RESPONSE_BYTES,
)
from kiln_verify.openenv.protocol.urls import normalize_base_url
from kiln_verify.records import Record, validate_record

__all__ = [
    "DEFAULT_URL",
    "FOLLOW_INTERVAL_S",
    "RUN_ID",
    "ControlClient",
    "check_run_id",
    "error_from_body",
    "load_run_request",
    "outcome_error",
]

DEFAULT_URL: Final = "http://127.0.0.1:8420"
FOLLOW_INTERVAL_S: Final = 0.5
RUN_ID: Final = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
SUCCESS_STATES: Final = frozenset({"rollout_ready", "completed"})
R = TypeVar("R", bound=Record)


def check_run_id(run_id: str) -> str:
    """A run id is a UUID; anything else never reaches a URL (usage error)."""
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(f"{snippet(run_id)} is not a run id (a UUID)", hint="see `openenv runs`")
    return run_id.lower()


def load_run_request(path: str, idempotency_key: str | None = None) -> dict[str, Any]:
    """The request object of ``--request FILE`` with ``--idempotency-key`` inserted."""
    try:
        with open_regular(path) as fd:
            size = os.fstat(fd).st_size
            if size > MAX_CONTROL_REQUEST_BYTES:
                raise RunRequestFileInvalid(
                    f"the request file has {size} bytes, more than MAX_CONTROL_REQUEST_BYTES = "
                    f"{MAX_CONTROL_REQUEST_BYTES}",
                    path=path,
                )
            data = os.read(fd, MAX_CONTROL_REQUEST_BYTES + 1)
    except RunRequestFileInvalid:
        raise
    except KilnError as exc:
        raise RunRequestFileInvalid(f"{exc.code}: {exc.rule}", path=path) from None
    if len(data) > MAX_CONTROL_REQUEST_BYTES:
        raise RunRequestFileInvalid("the request file grew beyond 1 MiB while read", path=path)
    try:
        request = loads_object(data, max_bytes=MAX_CONTROL_REQUEST_BYTES, source=path)
    except KilnError as exc:
        raise RunRequestFileInvalid(f"not one strict JSON object ({exc.code})", path=path) from None
    if idempotency_key is not None:
        present = request.get("idempotency_key")
        if "idempotency_key" in request and present != idempotency_key:
            raise IdempotencyKeyDisagrees(
                "the request file already has a different idempotency_key", path=path
            )
        request["idempotency_key"] = idempotency_key
    return request


def outcome_error(status: OpenEnvRunStatus) -> RunEndedUnsuccessfully | None:
    """``None`` for a successful terminal status, else the typed diagnosis to report."""
    if status.state in SUCCESS_STATES:
        return None
    failure = status.failure
    if failure is not None:
        error = RunEndedUnsuccessfully(
            f"run {status.run_id} failed: {failure.code} at stage {failure.stage} "
            f"(retryable: {'yes' if failure.retryable else 'no'}): {failure.message}",
            hint=failure.hint,
        )
        error.failure = failure.to_json()
        return error
    return RunEndedUnsuccessfully(
        f"run {status.run_id} ended {status.state}: {status.error or 'no reason given'}"
    )


def error_from_body(where: str, status: int, body: bytes) -> ControlHttpStatus:
    """``control_http_status`` for a refusal, with the server's typed ``error`` if any."""
    code = message = hint = None
    try:
        document = loads(body, max_bytes=MAX_CONTROL_RESPONSE_BYTES)
        detail = document.get("error") if isinstance(document, dict) else None
        if isinstance(detail, dict):
            code, message, hint = (detail.get(k) for k in ("code", "message", "hint"))
    except KilnError:
        pass
    text = f"{where} answered HTTP {status}"
    if isinstance(code, str):
        text += f" {snippet(code)}"
    if isinstance(message, str):
        text += f": {message[:1024]}"
    error = ControlHttpStatus(text, hint=hint[:512] if isinstance(hint, str) else None)
    error.http_status = status
    error.server_code = code if isinstance(code, str) else None
    return error


class ControlClient:
    """A client for one control-plane server; use as ``with ControlClient(url) as c``."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout: float = HTTP_REQUEST_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        try:
            parsed = normalize_base_url(base_url)
        except KilnError as exc:
            raise ControlUrlInvalid(exc.rule.replace("environment URL", "--url")) from None
        self.base_url = parsed.base_url
        self._http = httpx.Client(
            follow_redirects=False,
            trust_env=False,
            # Every request goes to base_url and redirects are never followed, so a plain
            # http:// client never negotiates TLS: skip loading the CA bundle (0.1-0.2 s).
            verify=parsed.is_https,
            timeout=httpx.Timeout(timeout, connect=HTTP_CONNECT_TIMEOUT_S),
            transport=transport,
        )

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- transport ----------------------------------------------------------------------

    @contextmanager
    def stream(
        self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None
    ) -> Iterator[httpx.Response]:
        """One request; 3xx is ``control_redirect``, non-2xx ``control_http_status``."""
        url = self.base_url + path
        try:
            with self._http.stream(method, url, json=body, headers=headers) as response:
                if 300 <= response.status_code < 400:
                    raise ControlRedirect(
                        f"{method} {path} answered {response.status_code} (a redirect to "
                        f"{snippet(response.headers.get('location', ''))}), never followed"
                    )
                if not 200 <= response.status_code < 300:
                    raise self._refusal(method, path, response)
                yield response
        except httpx.TimeoutException:
            raise ControlTransport(f"{method} {path} timed out") from None
        except httpx.HTTPError as exc:
            raise ControlTransport(
                f"{method} {path} failed: {type(exc).__name__}: {snippet(str(exc))}"
            ) from None

    def _read(self, response: httpx.Response, where: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_CONTROL_RESPONSE_BYTES:
                raise ControlResponseInvalid(
                    f"{where}: the answer exceeds MAX_CONTROL_RESPONSE_BYTES = "
                    f"{MAX_CONTROL_RESPONSE_BYTES}"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _refusal(self, method: str, path: str, response: httpx.Response) -> ControlHttpStatus:
        try:
            body = self._read(response, path)
        except (KilnError, httpx.HTTPError):
            body = b""
        return error_from_body(f"{method} {path}", response.status_code, body)

    def _json(self, model: type[R], method: str, path: str, body: Any = None) -> tuple[R, int]:
        with self.stream(method, path, body=body) as response:
            data = self._read(response, path)
            status = response.status_code
        try:
            value = loads(data, max_bytes=MAX_CONTROL_RESPONSE_BYTES)
            return validate_record(model, value), status
        except KilnError as exc:
            raise ControlResponseInvalid(
                f"{method} {path}: the answer is not a valid {model.__name__} "
                f"({exc.code}: {exc.rule})"
            ) from None

    # -- operations ---------------------------------------------------------------------

    def runs(self) -> RunList:
        return self._json(RunList, "GET", "/v1/openenv/runs")[0]

    def start(self, request: dict[str, Any]) -> tuple[OpenEnvRunStatus, bool]:
        """``(status, created)``: 202 is a new run, 200 the original run of an exact retry."""
        status, code = self._json(OpenEnvRunStatus, "POST", "/v1/openenv/runs", request)
        if code not in (200, 202):
            raise ControlResponseInvalid(f"POST /v1/openenv/runs answered {code}, not 200/202")
        return status, code == 202

    def status(self, run_id: str) -> OpenEnvRunStatus:
        run_id = check_run_id(run_id)
        status = self._json(OpenEnvRunStatus, "GET", f"/v1/openenv/runs/{run_id}")[0]
        if status.run_id != run_id:
            raise ControlResponseInvalid(f"asked for run {run_id}, got {snippet(status.run_id)}")
        return status

    def cancel(self, run_id: str) -> OpenEnvRunStatus:
        return self._json(OpenEnvRunStatus, "DELETE", f"/v1/openenv/runs/{check_run_id(run_id)}")[0]

    def resume(self, run_id: str) -> OpenEnvRunStatus:
        """kiln-verify's resume route: the new run continuing an interrupted run (202)."""
        path = f"/v1/openenv/runs/{check_run_id(run_id)}/resume"
        status, code = self._json(OpenEnvRunStatus, "POST", path)
        if code != 202:
            raise ControlResponseInvalid(f"POST {path} answered {code}, not 202")
        return status

    def follow(
        self,
        run_id: str,
        on_status: Callable[[OpenEnvRunStatus], None] | None = None,
        *,
        interval: float = FOLLOW_INTERVAL_S,
    ) -> OpenEnvRunStatus:
        """Poll the status until it is terminal, handing every one to ``on_status``."""
        while True:
            status = self.status(run_id)
            if on_status is not None:
                on_status(status)
            if status.terminal:
                return status
            time.sleep(interval)
