"""The Anthropic invoker: the Messages API streamed over Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from memstore.invokers._config import api_key_for, http_url, setting
from memstore.invokers._http import (
    Decoder,
    Endpoint,
    HttpInvoker,
    RetryPolicy,
    clip,
    error_detail,
    make_endpoint,
)
from memstore.invokers._mapping import flatten, paired_calls, result_text
from memstore.invokers._sse import ServerSentEvent
from memstore.types import (
    Conversation,
    ImageBlock,
    JsonDict,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamOptions,
    StreamTextDelta,
    StreamThinkingDelta,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Turn,
    Usage,
)

__all__ = ["AnthropicInvoker", "anthropic", "messages_payload"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


def anthropic(
    model: str,
    api_key: str | None = None,
    *,
    base_url: str | None = None,
    timeout: float = 120.0,
    connect_timeout: float = 10.0,
    max_retries: int = 2,
    retry_backoff: float = 0.5,
    max_retry_delay: float = 20.0,
    max_output_tokens: int = 1024,
    extra_headers: Mapping[str, str] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    client: httpx.AsyncClient | None = None,
) -> AnthropicInvoker:
    """A ModelInvoker that streams `POST {base_url}/v1/messages`.

    Args:
        model: the model; `StreamOptions.model` overrides it.
        api_key: sent as `x-api-key`; else `ANTHROPIC_API_KEY`; required for api.anthropic.com.
        base_url: the API root, without `/v1`; else `ANTHROPIC_BASE_URL`, else Anthropic's.
        timeout: seconds the server may stay silent (before the answer and between events).
        connect_timeout: seconds to establish the connection.
        max_retries: retries of a 408, 429, 5xx, timeout or connection error before the first event.
        retry_backoff: the first backoff in seconds, doubled per retry, with jitter.
        max_retry_delay: the cap on any wait, `Retry-After` included.
        max_output_tokens: `max_tokens` (the API requires one); `StreamOptions` overrides it.
        extra_headers: added to every request, overriding the invoker's own (`anthropic-beta`, ...).
        extra_body: merged into every request body (temperature, thinking, ...).
        client: an httpx.AsyncClient to reuse; the caller keeps ownership and closes it.

    Raises:
        InvokerConfigError: a malformed URL, a bad number, or no key for api.anthropic.com.
    """
    root = http_url(
        setting(base_url, "ANTHROPIC_BASE_URL", DEFAULT_BASE_URL) or "", "ANTHROPIC_BASE_URL"
    )
    key = api_key_for(root, setting(api_key, "ANTHROPIC_API_KEY"), "ANTHROPIC_API_KEY")
    headers = {"accept": "text/event-stream", "anthropic-version": API_VERSION}
    if key:
        headers["x-api-key"] = key
    endpoint = make_endpoint(
        f"{root}/v1/messages",
        headers,
        extra_headers,
        timeout=timeout,
        connect_timeout=connect_timeout,
        retry=RetryPolicy(max_retries, retry_backoff, max_retry_delay),
        client=client,
    )
    return AnthropicInvoker(endpoint, model, max_output_tokens, dict(extra_body or {}))


class AnthropicInvoker(HttpInvoker):
    """Streams the Messages API; build it with `anthropic`."""

    def __init__(
        self, endpoint: Endpoint, model: str, max_output_tokens: int, extra_body: JsonDict
    ) -> None:
        super().__init__(endpoint, model)
        self._max_output_tokens = max_output_tokens
        self._extra_body = extra_body

    def request_body(self, conversation: Conversation, options: StreamOptions) -> JsonDict:
        body: JsonDict = {
            "model": options.model or self.model,
            "max_tokens": options.max_output_tokens or self._max_output_tokens,
            "messages": messages_payload(conversation),
            "stream": True,
        }
        if conversation.system:
            body["system"] = conversation.system
        return {**body, **self._extra_body}

    def new_decoder(self) -> Decoder:
        return _EventDecoder(self.endpoint.url)


def messages_payload(conversation: Conversation) -> list[JsonDict]:
    """Our turns as Messages API messages: tool pairs native, the rest as text or images."""
    messages: list[JsonDict] = []
    for turn, native in zip(conversation.turns, paired_calls(conversation.turns), strict=True):
        content = _content(turn, native)
        if content:
            messages.append({"role": turn.role, "content": content})
    return messages


def _content(turn: Turn, native: frozenset[str]) -> list[JsonDict]:
    """A turn's content blocks; tool results go first, as the API requires."""
    results: list[JsonDict] = []
    rest: list[JsonDict] = []
    for block in turn.blocks:
        if isinstance(block, ToolResultBlock) and turn.role == "user" and block.call_id in native:
            result: JsonDict = {
                "type": "tool_result",
                "tool_use_id": block.call_id,
                "content": result_text(block),
            }
            if block.is_error:
                result["is_error"] = True
            results.append(result)
        elif isinstance(block, ToolCallBlock) and turn.role == "assistant" and block.id in native:
            arguments = block.input if isinstance(block.input, dict) else {"input": block.input}
            rest.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
            )
        elif isinstance(block, ImageBlock) and turn.role == "user":
            source = {"type": "base64", "media_type": block.media_type, "data": block.data_base64}
            rest.append({"type": "image", "source": source})
        elif text := flatten(block):  # the API refuses empty text blocks
            rest.append({"type": "text", "text": text})
    return results + rest


class _EventDecoder:
    """Messages stream events to stream events; `message_stop` ends the turn."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._input_tokens = 0
        self._output_tokens = 0

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        try:
            payload = json.loads(event.data)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return [self._malformed(event.data)]
        kind = payload.get("type") or event.event
        if kind == "error":
            problem = payload.get("error")
            error_type = problem.get("type") if isinstance(problem, dict) else None
            detail = error_detail(event.data)
            if isinstance(error_type, str) and error_type:
                detail = f"{error_type}: {detail}"
            return [StreamError(message=f"{self._url} reported an error mid-stream: {detail}")]
        if kind == "message_stop":
            return [self._done()]
        if kind == "message_start":
            message = payload.get("message")
            self._count(message.get("usage") if isinstance(message, dict) else None)
            return []
        if kind == "message_delta":
            self._count(payload.get("usage"))
            return []
        if kind == "content_block_start":
            return self._piece(payload.get("content_block"), event.data)
        if kind == "content_block_delta":
            return self._piece(payload.get("delta"), event.data)
        return []  # ping, content_block_stop, and event types added after this was written

    def _piece(self, piece: Any, data: str) -> list[StreamEvent]:
        """The delta carried by a content block's start or delta, if it is text or thinking."""
        if not isinstance(piece, dict):
            return [self._malformed(data)]
        kind = piece.get("type")
        if kind in ("text", "text_delta"):
            text = piece.get("text", "")
            if not isinstance(text, str):
                return [self._malformed(data)]
            self._text.append(text)
            return [StreamTextDelta(delta=text)] if text else []
        if kind in ("thinking", "thinking_delta"):
            thinking = piece.get("thinking", "")
            if not isinstance(thinking, str):
                return [self._malformed(data)]
            self._thinking.append(thinking)
            return [StreamThinkingDelta(delta=thinking)] if thinking else []
        return []  # tool input, signatures, redacted thinking: not part of a summary

    def _count(self, usage: Any) -> None:
        """Take the counts a usage object reports; cached input counts as input."""
        if not isinstance(usage, Mapping):
            return
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        inputs = [count for key in keys if (count := _token_count(usage.get(key))) is not None]
        if inputs:
            self._input_tokens = sum(inputs)
        output = _token_count(usage.get("output_tokens"))
        if output is not None:
            self._output_tokens = output

    def at_eof(self) -> StreamEvent:
        return StreamError(message=f"the stream from {self._url} ended before message_stop")

    def _done(self) -> StreamDone:
        thinking = "".join(self._thinking)
        blocks = (ThinkingBlock(text=thinking),) if thinking else ()
        turn = Turn(role="assistant", blocks=(*blocks, TextBlock(text="".join(self._text))))
        usage = Usage(input_tokens=self._input_tokens, output_tokens=self._output_tokens)
        return StreamDone(turn=turn, usage=usage)

    def _malformed(self, data: str) -> StreamError:
        return StreamError(message=f"{self._url} sent a malformed event: {clip(data, 200)}")


def _token_count(value: Any) -> int | None:
    """A reported token count, or None for anything that is not a non-negative integer."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return None
