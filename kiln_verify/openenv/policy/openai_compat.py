"""The ``openai`` policy: any OpenAI-compatible ``POST {base_url}/chat/completions`` server.

``base_url`` includes the API prefix (``http://127.0.0.1:8000/v1``). One request per step,
non-streaming, ``n = 1``, with the request's temperature, ``max_tokens`` = max action
tokens and ``seed`` = the generation seed; ``chat_template_kwargs.enable_thinking`` carries
the thinking flag unless ``send_template_kwargs`` is off (servers that reject unknown
fields). Redirects are never followed, the body is counted while it streams and refused
above ``max_response_bytes`` (default ``MAX_POLICY_RESPONSE_BYTES``), and it is parsed with
the strict JSON reader. The API key is read once from a named environment variable, sent
only as ``Authorization: Bearer``, never appears in identities or errors, and a response
that echoes it is refused before parsing.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import httpx

from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import (
    KilnError,
    LimitExceeded,
    PolicyConfigInvalid,
    PolicyHttpStatus,
    PolicyRedirect,
    PolicyResponseInvalid,
    PolicyTransport,
)
from kiln_verify.limits import (
    HTTP_CHAT_TIMEOUT_S,
    HTTP_CONNECT_TIMEOUT_S,
    MAX_BASE_URL_CHARS,
    MAX_POLICY_RESPONSE_BYTES,
)
from kiln_verify.openenv.credentials import BearerToken, check_reflection, read_bearer_token
from kiln_verify.openenv.policy.base import (
    MONOTONIC,
    BehaviorPolicyIdentity,
    Clock,
    PolicyRequest,
    PolicyResponse,
    elapsed_ms,
)


def _is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


def _int_field(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class OpenAICompatPolicy:
    """Chat completions over httpx; one shared connection pool, closed by :meth:`aclose`."""

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
        if self._token is not None and url.scheme != "https" and not _is_loopback(url.host):
            raise PolicyConfigInvalid(
                "refusing to send an API key over plain http to a non-loopback host; use https"
            )
        self._endpoint = str(url).rstrip("/") + "/chat/completions"
        self._base_url = str(url).rstrip("/")
        self._model = model
        self._send_template_kwargs = send_template_kwargs
        self._max_bytes = max_response_bytes
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

    async def _post(self, body: dict[str, Any]) -> bytes:
        try:
            async with self._client.stream("POST", self._endpoint, json=body) as response:
                status = response.status_code
                if 300 <= status < 400:
                    raise PolicyRedirect(f"the chat-completions server answered HTTP {status}")
                if not 200 <= status < 300:
                    raise PolicyHttpStatus(f"the chat-completions server answered HTTP {status}")
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > self._max_bytes:
                    raise LimitExceeded(
                        "the chat-completions response body",
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
                            "the chat-completions response body",
                            limit="MAX_POLICY_RESPONSE_BYTES",
                            bound=self._max_bytes,
                            observed=size,
                        )
                    chunks.append(chunk)
                return b"".join(chunks)
        except KilnError:
            raise
        except httpx.TimeoutException:
            raise PolicyTransport("the chat-completions request timed out") from None
        except httpx.HTTPError as exc:
            raise PolicyTransport(
                f"the chat-completions request failed ({type(exc).__name__})"
            ) from None

    def _parse(self, data: bytes) -> tuple[str, str | None, int, int, str | None]:
        check_reflection(self._token, data, "the chat-completions response")
        try:
            document = loads_object(data, max_bytes=self._max_bytes)
        except KilnError as exc:
            raise PolicyResponseInvalid(
                f"the chat-completions response is not one strict JSON object ({exc.code})"
            ) from None
        choices = document.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise PolicyResponseInvalid("the response has no choices[0] object")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise PolicyResponseInvalid("choices[0].message is not an object")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise PolicyResponseInvalid("choices[0].message.content is not a string or null")
        reasoning = message.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            raise PolicyResponseInvalid("choices[0].message.reasoning_content is not a string")
        finish = choices[0].get("finish_reason")
        usage = document.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return (
            content or "",
            reasoning,
            _int_field(usage.get("prompt_tokens")),
            _int_field(usage.get("completion_tokens")),
            finish if isinstance(finish, str) else None,
        )

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        start = self._clock()
        data = await self._post(self._body(request))
        latency = elapsed_ms(self._clock, start)
        text, reasoning, prompt_tokens, completion_tokens, finish = self._parse(data)
        return PolicyResponse(
            text=text,
            reasoning=reasoning,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency,
            finish_reason=finish,
        )

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
