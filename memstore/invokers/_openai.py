"""The OpenAI-compatible invoker: Chat Completions streamed over Server-Sent Events.

Works with OpenAI and the servers that copy its API (vLLM, Ollama, LM Studio, LiteLLM).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import httpx

from memstore import jsjson
from memstore.invokers._config import InvokerConfigError, api_key_for, http_url, setting
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

__all__ = ["OpenAICompatibleInvoker", "chat_messages", "openai_compatible"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def openai_compatible(
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    *,
    timeout: float = 120.0,
    connect_timeout: float = 10.0,
    max_retries: int = 2,
    retry_backoff: float = 0.5,
    max_retry_delay: float = 20.0,
    max_output_tokens: int | None = None,
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    include_usage: bool = True,
    extra_headers: Mapping[str, str] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    client: httpx.AsyncClient | None = None,
) -> OpenAICompatibleInvoker:
    """A ModelInvoker that streams `POST {base_url}/chat/completions`.

    Args:
        base_url: the API root, `/v1` included; else `OPENAI_BASE_URL`, else OpenAI's.
        model: the model; `StreamOptions.model` overrides it, and one of the two is required.
        api_key: sent as a bearer token; else `OPENAI_API_KEY`; without one, no Authorization
            header is sent (fine for Ollama and most local servers, refused for api.openai.com).
        timeout: seconds the server may stay silent (before the answer and between chunks).
        connect_timeout: seconds to establish the connection.
        max_retries: retries of a 408, 429, 5xx, timeout or connection error before the first event.
        retry_backoff: the first backoff in seconds, doubled per retry, with jitter.
        max_retry_delay: the cap on any wait, `Retry-After` included.
        max_output_tokens: the default `max_tokens`; `StreamOptions.max_output_tokens` overrides it.
        max_tokens_field: `max_completion_tokens` for OpenAI reasoning models that refuse the other.
        include_usage: ask for token usage (`stream_options`); turn off for servers refusing it.
        extra_headers: added to every request, overriding the invoker's own.
        extra_body: merged into every request body (temperature, reasoning_effort, ...).
        client: an httpx.AsyncClient to reuse; the caller keeps ownership and closes it.

    Raises:
        InvokerConfigError: a malformed URL, a bad number, or no key for api.openai.com.
    """
    root = http_url(setting(base_url, "OPENAI_BASE_URL", DEFAULT_BASE_URL) or "", "OPENAI_BASE_URL")
    key = api_key_for(root, setting(api_key, "OPENAI_API_KEY"), "OPENAI_API_KEY")
    headers = {"accept": "text/event-stream"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    endpoint = make_endpoint(
        f"{root}/chat/completions",
        headers,
        extra_headers,
        timeout=timeout,
        connect_timeout=connect_timeout,
        retry=RetryPolicy(max_retries, retry_backoff, max_retry_delay),
        client=client,
    )
    return OpenAICompatibleInvoker(
        endpoint,
        model,
        max_output_tokens=max_output_tokens,
        max_tokens_field=max_tokens_field,
        include_usage=include_usage,
        extra_body=dict(extra_body or {}),
    )


class OpenAICompatibleInvoker(HttpInvoker):
    """Streams Chat Completions; build it with `openai_compatible`."""

    def __init__(
        self,
        endpoint: Endpoint,
        model: str | None,
        *,
        max_output_tokens: int | None,
        max_tokens_field: str,
        include_usage: bool,
        extra_body: JsonDict,
    ) -> None:
        super().__init__(endpoint, model)
        self._max_output_tokens = max_output_tokens
        self._max_tokens_field = max_tokens_field
        self._include_usage = include_usage
        self._extra_body = extra_body

    def request_body(self, conversation: Conversation, options: StreamOptions) -> JsonDict:
        model = options.model or self.model
        if not model:
            raise InvokerConfigError("no model: pass model=... or set StreamOptions.model")
        body: JsonDict = {"model": model, "messages": chat_messages(conversation), "stream": True}
        if self._include_usage:
            body["stream_options"] = {"include_usage": True}
        max_tokens = options.max_output_tokens or self._max_output_tokens
        if max_tokens:
            body[self._max_tokens_field] = max_tokens
        return {**body, **self._extra_body}

    def new_decoder(self) -> Decoder:
        return _ChunkDecoder(self.endpoint.url)


def chat_messages(conversation: Conversation) -> list[JsonDict]:
    """Our conversation as chat messages: system first, tool pairs native, the rest as text."""
    messages: list[JsonDict] = []
    if conversation.system:
        messages.append({"role": "system", "content": conversation.system})
    for turn, native in zip(conversation.turns, paired_calls(conversation.turns), strict=True):
        if turn.role == "assistant":
            messages.extend(_assistant_message(turn, native))
        else:
            messages.extend(_user_messages(turn, native))
    return messages


def _user_messages(turn: Turn, native: frozenset[str]) -> list[JsonDict]:
    """Native tool results first (as `tool` messages), then one user message with the rest."""
    messages: list[JsonDict] = []
    parts: list[JsonDict] = []
    for block in turn.blocks:
        if isinstance(block, ToolResultBlock) and block.call_id in native:
            output = result_text(block)
            output = f"error: {output}" if block.is_error else output
            messages.append({"role": "tool", "tool_call_id": block.call_id, "content": output})
        elif isinstance(block, ImageBlock):
            url = f"data:{block.media_type};base64,{block.data_base64}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif (flat := flatten(block)) is not None:
            parts.append({"type": "text", "text": flat})
    if parts:
        only_text = all(part["type"] == "text" for part in parts)
        content: str | list[JsonDict] = (
            "\n\n".join(part["text"] for part in parts) if only_text else parts
        )
        messages.append({"role": "user", "content": content})
    return messages


def _assistant_message(turn: Turn, native: frozenset[str]) -> list[JsonDict]:
    """One assistant message: its text, and its answered tool calls as `tool_calls`."""
    texts: list[str] = []
    calls: list[JsonDict] = []
    for block in turn.blocks:
        if isinstance(block, ToolCallBlock) and block.id in native:
            arguments = jsjson.dumps({} if block.input is None else block.input)
            function = {"name": block.name, "arguments": arguments}
            calls.append({"id": block.id, "type": "function", "function": function})
        elif (text := flatten(block)) is not None:
            texts.append(text)
    if not texts and not calls:
        return []
    message: JsonDict = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return [message]


class _ChunkDecoder:
    """Chat completion chunks to stream events; `[DONE]` (or EOF after a finish) ends the turn."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._usage = Usage()
        self._finished = False

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        data = event.data.strip()
        if data == "[DONE]":
            return [self._done()]
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            return [self._malformed(data)]
        if event.event == "error" or chunk.get("error"):
            detail = error_detail(data)
            return [StreamError(message=f"{self._url} reported an error mid-stream: {detail}")]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = Usage(
                input_tokens=_count(usage.get("prompt_tokens")),
                output_tokens=_count(usage.get("completion_tokens")),
            )
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            return [self._malformed(data)]
        events: list[StreamEvent] = []
        for choice in choices:
            if not isinstance(choice, dict) or not isinstance(choice.get("delta") or {}, dict):
                return [self._malformed(data)]
            if choice.get("index", 0) != 0:
                continue
            events.extend(self._deltas(choice.get("delta") or {}))
            self._finished = self._finished or bool(choice.get("finish_reason"))
        return events

    def _deltas(self, delta: Mapping[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            events.append(StreamThinkingDelta(delta=reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            events.append(StreamTextDelta(delta=content))
        return events

    def at_eof(self) -> StreamEvent:
        # Some servers end the body after the finishing chunk without sending `[DONE]`.
        if self._finished:
            return self._done()
        return StreamError(message=f"the stream from {self._url} ended before [DONE]")

    def _done(self) -> StreamDone:
        thinking = "".join(self._reasoning)
        blocks = (ThinkingBlock(text=thinking),) if thinking else ()
        turn = Turn(role="assistant", blocks=(*blocks, TextBlock(text="".join(self._text))))
        return StreamDone(turn=turn, usage=self._usage)

    def _malformed(self, data: str) -> StreamError:
        return StreamError(message=f"{self._url} sent a malformed event: {clip(data, 200)}")


def _count(value: Any) -> int:
    """A token count as reported, or 0 for anything that is not a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
