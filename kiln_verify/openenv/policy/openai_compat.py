"""The ``openai`` policy: any OpenAI-compatible ``POST {base_url}/chat/completions`` server.

``base_url`` includes the API prefix (``http://127.0.0.1:8000/v1``). One request per step,
non-streaming, ``n = 1``, with the request's temperature, ``max_tokens`` = max action
tokens and ``seed`` = the generation seed; ``chat_template_kwargs.enable_thinking`` carries
the thinking flag unless ``send_template_kwargs`` is off (servers that reject unknown
fields). Redirects are never followed, the body is counted while it streams and refused
above ``max_response_bytes`` (default ``MAX_POLICY_RESPONSE_BYTES``), and it is parsed with
the strict JSON reader (:mod:`~kiln_verify.openenv.policy.openai_response`, which also
holds the reasoning rule). 429, 502-504 and refused connections are retried a bounded
number of times; every error names the endpoint URL, and a non-2xx answer's error quotes the
server's own reason, bounded and scrubbed (:mod:`~kiln_verify.openenv.policy.peer_reason`),
so a refusal explains itself. The API key is read once from a named
environment variable, sent only as ``Authorization: Bearer``, never appears in identities
or errors, and a response that echoes it in any spelling (raw, or JSON-escaped in any
decoded key or string: content, reasoning, an error object) is refused as
``credential_reflected``, as is a redirect whose ``Location`` carries it.

The call must run in one asyncio task from start to end (httpx's connection pool holds
anyio locks bound to the task that took them); the collector guarantees it
(:meth:`Session.keep_alive_while <kiln_verify.openenv.protocol.session.Session.keep_alive_while>`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import httpx

from kiln_verify.errors import (
    KilnError,
    LimitExceeded,
    PolicyConfigInvalid,
    PolicyHttpStatus,
    PolicyRateLimited,
    PolicyRedirect,
    PolicyTimeout,
    PolicyTransport,
    snippet,
)
from kiln_verify.limits import (
    DEFAULT_POLICY_RETRIES,
    HTTP_CHAT_TIMEOUT_S,
    HTTP_CONNECT_TIMEOUT_S,
    HTTP_POLICY_ERROR_BODY_TIMEOUT_S,
    MAX_BASE_URL_CHARS,
    MAX_POLICY_RESPONSE_BYTES,
    MAX_POLICY_RETRIES,
    POLICY_RETRY_AFTER_MAX_S,
    POLICY_RETRY_BACKOFF_MAX_S,
    POLICY_RETRY_BACKOFF_S,
)
from kiln_verify.openenv.policy.base import (
    MONOTONIC,
    BehaviorPolicyIdentity,
    Clock,
    PolicyRequest,
    PolicyResponse,
    elapsed_ms,
)
from kiln_verify.openenv.policy.openai_response import read_completion, read_document
from kiln_verify.openenv.policy.peer_reason import PeerReason, read_reason, status_hint
from kiln_verify.openenv.protocol.credentials import (
    BearerToken,
    check_header,
    read_bearer_token,
    read_guarded,
)
from kiln_verify.openenv.protocol.urls import is_loopback_host, verifies_tls


def _check_base_url(base_url: str) -> httpx.URL:
    if not isinstance(base_url, str) or not base_url.strip():
        raise PolicyConfigInvalid(
            "the openai policy needs base_url (e.g. http://127.0.0.1:8000/v1)"
        )
    if len(base_url) > MAX_BASE_URL_CHARS:
        raise PolicyConfigInvalid(f"base_url is longer than {MAX_BASE_URL_CHARS} characters")
    try:
        url = httpx.URL(base_url.strip())
    except (httpx.InvalidURL, ValueError):
        raise PolicyConfigInvalid("base_url is not a valid URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise PolicyConfigInvalid("base_url must be an absolute http(s) URL")
    if url.userinfo or url.query or url.fragment:
        raise PolicyConfigInvalid("base_url must not carry userinfo, a query or a fragment")
    return url


_RETRY_STATUSES = frozenset({502, 503, 504})


def _retry_after(value: str | None) -> float | None:
    """An integer-seconds ``Retry-After`` (HTTP dates are ignored: clocks disagree)."""
    if value is None or not value.strip().isdigit() or len(value.strip()) > 6:
        return None
    return float(int(value.strip()))


def _transport_rule(where: str, exc: httpx.HTTPError) -> str:
    text = str(exc)
    if "SSL" in text or "WRONG_VERSION_NUMBER" in text or "record layer" in text:
        return (
            f"TLS to {where} failed: the server does not speak https here "
            "(use http:// for a plain-HTTP server)"
        )
    return f"the request to {where} failed ({type(exc).__name__})"


class _Retryable(Exception):
    """One attempt that may be repeated: a status (or ``None`` for a connection failure)."""

    def __init__(
        self,
        status: int | None,
        retry_after: float | None,
        rule: str = "",
        reason: PeerReason | None = None,
    ) -> None:
        super().__init__(rule)
        self.status = status
        self.retry_after = retry_after
        self.rule = rule
        self.reason = reason

    def error(self, where: str, attempts: int) -> KilnError:
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        said = self.reason.render() if self.reason is not None else ""
        if self.status == 429:
            return PolicyRateLimited(f"{where} answered HTTP 429 (too many requests) {tries}{said}")
        if self.status is not None:
            return PolicyHttpStatus(
                f"{where} answered HTTP {self.status} {tries}{said}",
                hint=status_hint(self.status, self.reason),
            )
        return PolicyTransport(f"{self.rule} {tries}")


class OpenAICompatPolicy:
    """Chat completions over httpx; one shared connection pool, closed by :meth:`aclose`."""

    #: Why ``--grpo-output`` refuses this policy (named in the refusal).
    PROVENANCE_UNAVAILABLE: Final = (
        "a chat-completions API returns text, not the sampled token ids and behaviour "
        "log-probs a GRPO row needs"
    )

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        send_template_kwargs: bool = True,
        max_response_bytes: int = MAX_POLICY_RESPONSE_BYTES,
        timeout_s: float = HTTP_CHAT_TIMEOUT_S,
        connect_timeout_s: float = HTTP_CONNECT_TIMEOUT_S,
        max_retries: int = DEFAULT_POLICY_RETRIES,
        retry_backoff_s: float = POLICY_RETRY_BACKOFF_S,
        error_body_timeout_s: float = HTTP_POLICY_ERROR_BODY_TIMEOUT_S,
        clock: Clock = MONOTONIC,
        environ: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url = _check_base_url(base_url)
        if not isinstance(model, str) or not model.strip():
            raise PolicyConfigInvalid("the openai policy needs a model name")
        self._token: BearerToken | None = (
            read_bearer_token(api_key_env, environ) if api_key_env else None
        )
        if self._token is not None and url.scheme != "https" and not is_loopback_host(url.host):
            raise PolicyConfigInvalid(
                "refusing to send an API key over plain http to a non-loopback host; use https"
            )
        self._endpoint = str(url).rstrip("/") + "/chat/completions"
        self._base_url = str(url).rstrip("/")
        self._model = model
        self._send_template_kwargs = send_template_kwargs
        if (
            isinstance(max_retries, bool)
            or not isinstance(max_retries, int)
            or not 0 <= max_retries <= MAX_POLICY_RETRIES
        ):
            raise PolicyConfigInvalid(f"max_retries must be an integer in 0..{MAX_POLICY_RETRIES}")
        self._max_bytes = max_response_bytes
        self._max_retries = max_retries
        self._backoff_s = retry_backoff_s
        self._timeout_s = timeout_s
        self._error_body_timeout_s = error_body_timeout_s
        self._clock = clock
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if self._token is not None:
            headers.update(self._token.headers())
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            headers=headers,
            trust_env=False,
            transport=transport,
            verify=verifies_tls(self._base_url),
        )

    def _body(self, request: PolicyRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [dict(message) for message in request.messages],
            "stream": False,
            "n": 1,
            "seed": request.generation_seed,
            "max_tokens": request.max_action_tokens,
            "temperature": request.temperature,
        }
        if self._send_template_kwargs:
            body["chat_template_kwargs"] = {"enable_thinking": request.thinking}
        return body

    async def _post_once(self, body: dict[str, Any]) -> bytes:
        """One attempt; a retryable failure raises :class:`_Retryable`."""
        where = self._endpoint
        try:
            async with self._client.stream("POST", where, json=body) as response:
                status = response.status_code
                if 300 <= status < 400:
                    location = response.headers.get("location", "")
                    check_header(self._token, location, f"the redirect from {where}")
                    location = snippet(location)
                    raise PolicyRedirect(
                        f"{where} answered HTTP {status} redirecting to {location}"
                    )
                if not 200 <= status < 300:
                    reason = await read_reason(
                        response, self._token, timeout_s=self._error_body_timeout_s
                    )
                    if status == 429 or status in _RETRY_STATUSES:
                        after = _retry_after(response.headers.get("retry-after"))
                        raise _Retryable(status, after, reason=reason)
                    raise PolicyHttpStatus(
                        f"{where} answered HTTP {status}{reason.render()}",
                        hint=status_hint(status, reason),
                    )
                return await self._read_capped(response)
        except (KilnError, _Retryable):
            raise
        except httpx.ConnectError as exc:
            raise _Retryable(None, None, _transport_rule(where, exc)) from None
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout):
                raise _Retryable(None, None, f"connecting to {where} timed out") from None
            raise PolicyTimeout(f"{where} did not answer within {self._timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise PolicyTransport(f"{_transport_rule(where, exc)}") from None

    async def _read_capped(self, response: httpx.Response) -> bytes:
        what = f"the chat-completions response body from {self._endpoint}"
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_bytes:
            raise LimitExceeded(
                what,
                limit="MAX_POLICY_RESPONSE_BYTES",
                bound=self._max_bytes,
                observed=int(declared),
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > self._max_bytes:
                raise LimitExceeded(
                    what, limit="MAX_POLICY_RESPONSE_BYTES", bound=self._max_bytes, observed=size
                )
            chunks.append(chunk)
        return b"".join(chunks)

    async def _post(self, body: dict[str, Any]) -> bytes:
        """The body of a successful call, after at most ``max_retries`` retries.

        Retried: 429, 502, 503, 504 and connections that could not be made (nothing was
        generated); waits double from ``POLICY_RETRY_BACKOFF_S``, or follow an integer
        ``Retry-After`` of at most ``POLICY_RETRY_AFTER_MAX_S``. Never retried: other
        statuses, read timeouts (the server may still be generating), bad bodies.
        """
        attempt = 0
        while True:
            try:
                return await self._post_once(body)
            except _Retryable as failure:
                attempts = attempt + 1
                wait = failure.retry_after
                if wait is None:
                    wait = min(self._backoff_s * 2**attempt, POLICY_RETRY_BACKOFF_MAX_S)
                if attempt >= self._max_retries or wait > POLICY_RETRY_AFTER_MAX_S:
                    raise failure.error(self._endpoint, attempts) from None
                attempt += 1
                await asyncio.sleep(wait)

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        start = self._clock()
        data = await self._post(self._body(request))
        latency = elapsed_ms(self._clock, start)
        document = read_guarded(
            self._token, data, f"the response from {self._endpoint}", self._parse
        )
        completion = read_completion(document, where=self._endpoint)
        return PolicyResponse(
            text=completion.text,
            reasoning=completion.reasoning,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_ms=latency,
            finish_reason=completion.finish_reason,
        )

    def _parse(self, data: bytes | str) -> dict[str, Any]:
        return read_document(data, max_bytes=self._max_bytes, where=self._endpoint)

    def identity(self) -> BehaviorPolicyIdentity:
        return BehaviorPolicyIdentity(
            kind="openai",
            name=self._model,
            parameters={
                "base_url": self._base_url,
                "send_template_kwargs": self._send_template_kwargs,
            },
        )

    async def aclose(self) -> None:
        await self._client.aclose()
