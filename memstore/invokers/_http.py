"""The HTTP side of the model invokers: one streaming POST, retried until its first event.

Retries: a 408, 429 or 5xx answer, a connection error or a timeout is retried while no event has
been yielded yet, after `Retry-After` (capped) or an exponential backoff with jitter. Once an event
is out, a failure ends the stream instead: the consumer may already have acted on it.
Every failure becomes one terminal StreamError naming the URL, the status and the server's message.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from memstore import jsjson
from memstore.invokers._config import InvokerConfigError, positive
from memstore.invokers._sse import ServerSentEvent, iter_sse
from memstore.types import (
    Conversation,
    JsonDict,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamOptions,
)

__all__ = [
    "Decoder",
    "Endpoint",
    "HttpInvoker",
    "RetryPolicy",
    "clip",
    "error_detail",
    "make_endpoint",
]

_RETRYABLE = frozenset({408, 429, *range(500, 600)})
_ERROR_BODY_LIMIT = 64 * 1024
_CLIP = 500


class Decoder(Protocol):
    """Turns one API's server-sent events into stream events; a done or error event ends it."""

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]: ...

    def at_eof(self) -> StreamEvent: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often, and after how long, a request that failed before its first event is retried."""

    max_retries: int = 2
    backoff: float = 0.5
    max_delay: float = 20.0

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise InvokerConfigError(f"max_retries must be an integer, got {self.max_retries!r}")
        positive("max_retries", self.max_retries, zero_ok=True)
        positive("retry_backoff", self.backoff, zero_ok=True)
        positive("max_retry_delay", self.max_delay, zero_ok=True)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number `attempt + 1`: the server's wish, or a backoff."""
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        ceiling = min(self.max_delay, self.backoff * 2.0**attempt)
        return ceiling * (0.5 + random.random() / 2)  # jitter spreads clients that failed together


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to POST: URL, headers, timeouts, retries, maybe a caller-owned client."""

    url: str
    headers: httpx.Headers
    timeout: httpx.Timeout
    retry: RetryPolicy
    client: httpx.AsyncClient | None = None


def make_endpoint(
    url: str,
    headers: Mapping[str, str],
    extra_headers: Mapping[str, str] | None,
    *,
    timeout: float,
    connect_timeout: float,
    retry: RetryPolicy,
    client: httpx.AsyncClient | None,
) -> Endpoint:
    """An Endpoint after checking the numbers; `extra_headers` win over the invoker's own."""
    merged = httpx.Headers({"content-type": "application/json", **headers})
    merged.update(extra_headers or {})
    limits = httpx.Timeout(
        positive("timeout", timeout), connect=positive("connect_timeout", connect_timeout)
    )
    return Endpoint(url, merged, limits, retry, client)


class HttpInvoker(ABC):
    """A ModelInvoker that streams one HTTP request per call; subclasses speak one API."""

    def __init__(self, endpoint: Endpoint, model: str | None) -> None:
        self.endpoint = endpoint
        self.model = model

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, url={self.endpoint.url!r})"

    def __call__(
        self, conversation: Conversation, options: StreamOptions
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the model's reply; bad arguments raise here, every other failure is an event."""
        body = jsjson.dumps_bytes(self.request_body(conversation, options))
        return _post_stream(self.endpoint, body, self.new_decoder)

    @abstractmethod
    def request_body(self, conversation: Conversation, options: StreamOptions) -> JsonDict:
        """The JSON body of one streaming request."""

    @abstractmethod
    def new_decoder(self) -> Decoder:
        """A fresh decoder for one attempt's response."""


@dataclass(frozen=True, slots=True)
class _Retry:
    """A failure before the first event, which another attempt may cure."""

    message: str
    retry_after: float | None = None


async def _post_stream(
    endpoint: Endpoint, body: bytes, new_decoder: Callable[[], Decoder]
) -> AsyncGenerator[StreamEvent, None]:
    """POST `body` and yield the decoded events, retrying failures before the first one."""
    client = httpx.AsyncClient() if endpoint.client is None else endpoint.client
    try:
        attempt = 0
        while True:
            retry: _Retry | None = None
            async with aclosing(_attempt(client, endpoint, body, new_decoder())) as items:
                async for item in items:
                    if isinstance(item, _Retry):
                        retry = item
                    else:
                        yield item
            if retry is None:
                return
            if attempt >= endpoint.retry.max_retries:
                tries = f" (gave up after {attempt + 1} attempts)" if attempt else ""
                yield StreamError(message=retry.message + tries)
                return
            await asyncio.sleep(endpoint.retry.delay(attempt, retry.retry_after))
            attempt += 1
    finally:
        if endpoint.client is None:
            await client.aclose()


async def _attempt(
    client: httpx.AsyncClient, endpoint: Endpoint, body: bytes, decoder: Decoder
) -> AsyncGenerator[StreamEvent | _Retry, None]:
    """One request: its events up to a terminal one, or a single StreamError or _Retry."""
    started = False
    try:
        async with client.stream(
            "POST", endpoint.url, content=body, headers=endpoint.headers, timeout=endpoint.timeout
        ) as response:
            if not response.is_success or "json" in response.headers.get("content-type", ""):
                yield await _refusal(endpoint, response)
                return
            async with aclosing(iter_sse(response.aiter_lines())) as events:
                async for sse in events:
                    for event in decoder.feed(sse):
                        started = True
                        yield event
                        if isinstance(event, StreamDone | StreamError):
                            return
            yield decoder.at_eof()
    except httpx.HTTPError as exc:
        if isinstance(exc.__context__, GeneratorExit):
            return  # the consumer closed the stream; a failure while closing is nobody's news
        if isinstance(exc.__context__, asyncio.CancelledError):
            raise exc.__context__ from exc
        if not isinstance(exc, httpx.TransportError):
            yield StreamError(message=f"the request to {endpoint.url} failed: {_describe(exc)}")
            return
        message = _transport_failure(endpoint, exc, started)
        yield StreamError(message=message) if started else _Retry(message)


async def _refusal(endpoint: Endpoint, response: httpx.Response) -> StreamError | _Retry:
    """The StreamError (or _Retry) for an error status, or a body that is not an event stream."""
    detail = error_detail(await _read_some(response)) or response.reason_phrase or "no details"
    if response.is_success:
        kind = response.headers.get("content-type", "")
        return StreamError(
            message=f"{endpoint.url} answered {kind} instead of an event stream: {detail}"
        )
    message = f"HTTP {response.status_code} from {endpoint.url}: {detail}"
    if response.status_code in _RETRYABLE:
        return _Retry(message, _retry_after(response.headers))
    return StreamError(message=message)


async def _read_some(response: httpx.Response) -> bytes:
    """At most the first 64 KiB of the body: enough for any error message."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= _ERROR_BODY_LIMIT:
            break
    return b"".join(chunks)[:_ERROR_BODY_LIMIT]


def _transport_failure(endpoint: Endpoint, exc: httpx.TransportError, started: bool) -> str:
    if started:
        return f"the stream from {endpoint.url} broke off: {_describe(exc)}"
    if isinstance(exc, httpx.ConnectTimeout):
        return f"could not connect to {endpoint.url} within {endpoint.timeout.connect} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"{endpoint.url} sent nothing for {endpoint.timeout.read} s ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect to {endpoint.url}: {_describe(exc)}"
    return f"the request to {endpoint.url} failed: {_describe(exc)}"


def _describe(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait (`retry-after-ms` or `Retry-After`), if it says."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def error_detail(body: bytes | str) -> str:
    """The server's words: a JSON body's `error.message` (or `message`, `detail`), or its text."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.strip()
    try:
        found = _json_message(json.loads(text))
    except ValueError:
        found = None
    return clip(found or text)


def _json_message(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    for key in ("error", "message", "detail"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        found = _json_message(value)
        if found:
            return found
    return None


def clip(text: str, limit: int = _CLIP) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
