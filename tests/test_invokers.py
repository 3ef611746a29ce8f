"""The model invokers against real loopback servers that speak each API's streaming format."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memstore.invokers
from memstore import (
    SUMMARY_HEADING,
    CondensationError,
    Conversation,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamOptions,
    StreamTextDelta,
    StreamThinkingDelta,
    TextBlock,
    ThinkingBlock,
    Turn,
    Usage,
    parse_turn,
    render_transcript,
    summarize,
)
from memstore.invokers import InvokerConfigError, anthropic, extractive, openai_compatible
from memstore.invokers._http import HttpInvoker
from memstore.invokers._sse import ServerSentEvent, iter_sse

from .invoker_servers import (
    ScriptedServer,
    anthropic_frames,
    error,
    openai_frames,
    serve,
    silent,
    sse,
    stream,
)

T = TypeVar("T")
FAST: dict[str, Any] = {"timeout": 2.0, "connect_timeout": 2.0, "retry_backoff": 0.01}
HELLO = Conversation(
    system="Be brief.", turns=(Turn(role="user", blocks=(TextBlock(text="hello"),)),)
)


@dataclass(frozen=True)
class Api:
    """One wire API: how to build its invoker against a server, and what its server sends."""

    name: str
    path: str
    build: Callable[..., HttpInvoker]
    frames: Callable[[Sequence[str]], list[str]]
    error_body: Callable[[str], dict[str, Any]]
    terminal: str

    def invoker(self, server: ScriptedServer, **settings: Any) -> HttpInvoker:
        return self.build(server.url, **{**FAST, **settings})


OPENAI = Api(
    name="openai",
    path="/v1/chat/completions",
    build=lambda url, **kw: openai_compatible(f"{url}/v1", "test-model", "sk-test", **kw),
    frames=openai_frames,
    error_body=lambda message: {"error": {"message": message, "type": "server_error"}},
    terminal="[DONE]",
)
ANTHROPIC = Api(
    name="anthropic",
    path="/v1/messages",
    build=lambda url, **kw: anthropic("claude-test", "ak-test", base_url=url, **kw),
    frames=anthropic_frames,
    error_body=lambda message: {
        "type": "error",
        "error": {"type": "api_error", "message": message},
    },
    terminal="message_stop",
)
BOTH = pytest.mark.parametrize("api", [OPENAI, ANTHROPIC], ids=lambda api: api.name)


def collect(
    invoker: HttpInvoker, conversation: Conversation = HELLO, options: StreamOptions | None = None
) -> list[StreamEvent]:
    """Every event of one call, the stream closed afterwards."""

    async def run() -> list[StreamEvent]:
        async with aclosing(invoker(conversation, options or StreamOptions())) as events:
            return [event async for event in events]

    return run_bounded(run())


def run_bounded(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to completion on a new loop; a hang fails the test instead of blocking it."""
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def through_first_delta(frames: list[str]) -> list[str]:
    """The frames up to and including the one that carries the text `first`."""
    index = next(i for i, frame in enumerate(frames) if '"first"' in frame)
    return frames[: index + 1]


def only_error(events: list[StreamEvent]) -> str:
    """The message of the one terminal error; fails unless the stream ends with exactly one."""
    errors = [event for event in events if isinstance(event, StreamError)]
    assert len(errors) == 1, events
    assert events[-1] is errors[0], events
    return errors[0].message


# --- a normal stream ----------------------------------------------------------------------------


@BOTH
def test_a_stream_yields_text_deltas_then_done_with_usage(api: Api) -> None:
    with serve(stream(api.frames(["Hel", "lo", "!"]))) as server:
        events = collect(api.invoker(server))
        [request] = server.received
    assert events[:-1] == [StreamTextDelta(delta=piece) for piece in ("Hel", "lo", "!")]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.turn == Turn(role="assistant", blocks=(TextBlock(text="Hello!"),))
    assert done.usage == Usage(input_tokens=7, output_tokens=3)
    assert request.path == api.path
    assert request.body["stream"] is True
    assert request.headers["content-type"] == "application/json"


def test_openai_request_carries_model_messages_max_tokens_and_bearer_key() -> None:
    with serve(stream(openai_frames(["ok"]))) as server:
        invoker = OPENAI.invoker(server)
        collect(invoker, options=StreamOptions(max_output_tokens=55))
        collect(invoker, options=StreamOptions(model="other-model"))
        first, second = server.received
    assert first.headers["authorization"] == "Bearer sk-test"
    assert first.body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 55,
    }
    assert second.body["model"] == "other-model"
    assert "max_tokens" not in second.body


def test_anthropic_request_carries_model_system_max_tokens_and_api_key() -> None:
    with serve(stream(anthropic_frames(["ok"]))) as server:
        invoker = ANTHROPIC.invoker(server)
        collect(invoker)
        collect(invoker, options=StreamOptions(model="claude-other", max_output_tokens=77))
        first, second = server.received
    assert first.headers["x-api-key"] == "ak-test"
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in first.headers
    assert first.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "stream": True,
        "system": "Be brief.",
    }
    assert (second.body["model"], second.body["max_tokens"]) == ("claude-other", 77)


def test_extra_headers_and_body_reach_the_server() -> None:
    with serve(stream(openai_frames(["ok"]))) as server:
        invoker = OPENAI.invoker(
            server, extra_headers={"X-Team": "memory"}, extra_body={"temperature": 0}
        )
        collect(invoker)
        [request] = server.received
    assert request.headers["x-team"] == "memory"
    assert request.body["temperature"] == 0


RICH_TURNS: list[dict[str, Any]] = [
    {
        "role": "user",
        "blocks": [
            {"kind": "text", "text": "look at this"},
            {"kind": "image", "mediaType": "image/png", "dataBase64": "iVBO"},
        ],
    },
    {
        "role": "assistant",
        "blocks": [
            {"kind": "thinking", "text": "hmm"},
            {"kind": "text", "text": "checking"},
            {"kind": "tool_call", "id": "c1", "name": "ls", "input": {"dir": "."}},
            {"kind": "tool_call", "id": "c2", "name": "cat", "input": "x"},
        ],
    },
    {
        "role": "user",
        "blocks": [
            {"kind": "tool_result", "callId": "c1", "output": ["a.py"]},
            {"kind": "tool_result", "callId": "c9", "output": "lost", "isError": True},
            {"kind": "widget", "size": 3},
            {"kind": "text", "text": "go on"},
        ],
    },
]
RICH = Conversation(system="sys", turns=tuple(parse_turn(turn) for turn in RICH_TURNS))


def test_openai_maps_tool_pairs_natively_and_flattens_the_rest() -> None:
    with serve(stream(openai_frames(["ok"]))) as server:
        collect(OPENAI.invoker(server), RICH)
        [request] = server.received
    assert request.body["messages"] == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look at this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            ],
        },
        {
            "role": "assistant",
            "content": 'checking\n\n-> tool call cat [c2]: "x"',
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"dir":"."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '["a.py"]'},
        {
            "role": "user",
            "content": '<- tool error [c9]: "lost"\n\n[widget block]\n\ngo on',
        },
    ]


def test_anthropic_maps_tool_pairs_natively_and_flattens_the_rest() -> None:
    with serve(stream(anthropic_frames(["ok"]))) as server:
        collect(ANTHROPIC.invoker(server), RICH)
        [request] = server.received
    image = {"type": "base64", "media_type": "image/png", "data": "iVBO"}
    assert request.body["system"] == "sys"
    assert request.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look at this"},
                {"type": "image", "source": image},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "c1", "name": "ls", "input": {"dir": "."}},
                {"type": "text", "text": '-> tool call cat [c2]: "x"'},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": '["a.py"]'},
                {"type": "text", "text": '<- tool error [c9]: "lost"'},
                {"type": "text", "text": "[widget block]"},
                {"type": "text", "text": "go on"},
            ],
        },
    ]


def test_openai_reasoning_becomes_thinking() -> None:
    with serve(stream(openai_frames(["answer"], reasoning=["why", " not"]))) as server:
        events = collect(OPENAI.invoker(server))
    assert events[:3] == [
        StreamThinkingDelta(delta="why"),
        StreamThinkingDelta(delta=" not"),
        StreamTextDelta(delta="answer"),
    ]
    assert isinstance(events[-1], StreamDone)
    assert events[-1].turn.blocks == (ThinkingBlock(text="why not"), TextBlock(text="answer"))


def test_anthropic_thinking_becomes_thinking() -> None:
    with serve(stream(anthropic_frames(["answer"], thinking=["why"]))) as server:
        events = collect(ANTHROPIC.invoker(server))
    assert events[:2] == [StreamThinkingDelta(delta="why"), StreamTextDelta(delta="answer")]
    assert isinstance(events[-1], StreamDone)
    assert events[-1].turn.blocks == (ThinkingBlock(text="why"), TextBlock(text="answer"))


def test_openai_usage_may_be_absent() -> None:
    with serve(stream(openai_frames(["ok"], usage=None))) as server:
        events = collect(OPENAI.invoker(server))
    assert events[-1] == StreamDone(
        turn=Turn(role="assistant", blocks=(TextBlock(text="ok"),)), usage=Usage()
    )


def test_openai_accepts_a_finished_stream_without_done_marker() -> None:
    frames = openai_frames(["ok"])[:-1]  # some servers end the body without `[DONE]`
    with serve(stream(frames)) as server:
        events = collect(OPENAI.invoker(server))
    assert isinstance(events[-1], StreamDone)


# --- failures -----------------------------------------------------------------------------------


@BOTH
def test_a_disconnect_mid_stream_is_one_error_and_no_retry(api: Api) -> None:
    frames = through_first_delta(api.frames(["first", "second"]))
    with serve(stream(frames, end="drop")) as server:
        events = collect(api.invoker(server, max_retries=2))
        assert len(server.received) == 1
    assert events[0] == StreamTextDelta(delta="first")
    assert "broke off" in only_error(events)


@BOTH
def test_a_body_that_ends_before_the_terminal_event_is_an_error(api: Api) -> None:
    frames = through_first_delta(api.frames(["first", "second"]))
    with serve(stream(frames)) as server:
        events = collect(api.invoker(server))
    assert events[0] == StreamTextDelta(delta="first")
    assert f"ended before {api.terminal}" in only_error(events)


@BOTH
def test_429_with_retry_after_is_retried(api: Api) -> None:
    busy = error(429, api.error_body("slow down"), {"retry-after": "0"})
    with serve(busy, stream(api.frames(["fine"]))) as server:
        events = collect(api.invoker(server, retry_backoff=30.0))  # Retry-After wins
        assert len(server.received) == 2
    assert events[0] == StreamTextDelta(delta="fine")
    assert isinstance(events[-1], StreamDone)


@BOTH
def test_retry_after_is_capped(api: Api) -> None:
    busy = error(503, api.error_body("later"), {"retry-after": "3600"})
    with serve(busy, stream(api.frames(["fine"]))) as server:
        started = time.monotonic()
        events = collect(api.invoker(server, max_retry_delay=0.05))
        assert time.monotonic() - started < 2
    assert isinstance(events[-1], StreamDone)


@BOTH
def test_500_every_time_ends_in_one_error_after_the_retries(api: Api) -> None:
    with serve(error(500, api.error_body("the model fell over"))) as server:
        events = collect(api.invoker(server, max_retries=2))
        assert len(server.received) == 3
    message = only_error(events)
    assert events == [StreamError(message=message)]
    assert "HTTP 500" in message
    assert "the model fell over" in message
    assert "3 attempts" in message


@BOTH
def test_a_client_error_is_not_retried(api: Api) -> None:
    with serve(error(401, api.error_body("invalid x-api-key"))) as server:
        events = collect(api.invoker(server, max_retries=3))
        assert len(server.received) == 1
    message = only_error(events)
    assert "HTTP 401" in message
    assert "invalid x-api-key" in message


def test_a_plain_text_error_body_is_quoted() -> None:
    with serve(error(502, "Bad Gateway from the proxy")) as server:
        events = collect(OPENAI.invoker(server, max_retries=0))
    assert "HTTP 502" in only_error(events)
    assert "Bad Gateway from the proxy" in only_error(events)


@BOTH
def test_a_malformed_event_is_one_error(api: Api) -> None:
    frames = [*through_first_delta(api.frames(["first"])), sse("{not json"), *api.frames(["x"])]
    with serve(stream(frames)) as server:
        events = collect(api.invoker(server))
        assert len(server.received) == 1
    assert events[0] == StreamTextDelta(delta="first")
    assert "malformed event: {not json" in only_error(events)


def test_an_error_event_mid_stream_carries_the_server_message() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    frames = [*through_first_delta(anthropic_frames(["first"])), sse(overloaded, "error")]
    with serve(stream(frames)) as server:
        events = collect(ANTHROPIC.invoker(server))
    assert "overloaded_error: Overloaded" in only_error(events)

    frames = [sse({"error": {"message": "context too long"}})]
    with serve(stream(frames)) as server:
        events = collect(OPENAI.invoker(server))
    assert "context too long" in only_error(events)


def test_a_json_answer_instead_of_a_stream_is_an_error() -> None:
    with serve(error(200, {"error": {"message": "streaming unsupported"}})) as server:
        events = collect(OPENAI.invoker(server))
        assert len(server.received) == 1
    message = only_error(events)
    assert "instead of an event stream" in message
    assert "streaming unsupported" in message


@BOTH
def test_a_silent_server_times_out_with_an_error(api: Api) -> None:
    with serve(silent) as server:
        started = time.monotonic()
        events = collect(api.invoker(server, timeout=0.2, max_retries=0))
        elapsed = time.monotonic() - started
        assert server.client_hung_up()
    assert 0.2 <= elapsed < 1.5
    assert "sent nothing for 0.2 s" in only_error(events)


def test_a_timeout_before_the_first_event_is_retried() -> None:
    with serve(silent, stream(openai_frames(["late"]))) as server:
        events = collect(OPENAI.invoker(server, timeout=0.2, max_retries=1))
        assert len(server.received) == 2
    assert isinstance(events[-1], StreamDone)


def test_an_unreachable_server_is_an_error() -> None:
    with serve(silent) as server:
        url = server.url  # the port is free again once the server is gone
    invoker = openai_compatible(f"{url}/v1", "m", max_retries=1, retry_backoff=0.01)
    assert "could not connect" in only_error(collect(invoker))


# --- cancellation -------------------------------------------------------------------------------


@BOTH
def test_breaking_out_of_the_stream_closes_the_connection(api: Api) -> None:
    frames = through_first_delta(api.frames(["first", "second"]))
    with serve(stream(frames, end="hold")) as server:

        async def consume() -> bool:
            async for event in api.invoker(server)(HELLO, StreamOptions()):
                assert event == StreamTextDelta(delta="first")
                break
            return await asyncio.to_thread(server.client_hung_up)

        assert run_bounded(consume())


@BOTH
def test_aclose_closes_the_connection(api: Api) -> None:
    frames = through_first_delta(api.frames(["first", "second"]))
    with serve(stream(frames, end="hold")) as server:

        async def consume() -> bool:
            events = api.invoker(server)(HELLO, StreamOptions())
            assert await anext(events) == StreamTextDelta(delta="first")
            await events.aclose()
            return await asyncio.to_thread(server.client_hung_up)

        assert run_bounded(consume())


@BOTH
def test_cancelling_the_task_closes_the_connection(api: Api) -> None:
    frames = through_first_delta(api.frames(["first", "second"]))
    with serve(stream(frames, end="hold")) as server:

        async def consume(first: asyncio.Event) -> None:
            async for _ in api.invoker(server)(HELLO, StreamOptions()):
                first.set()

        async def main() -> bool:
            first = asyncio.Event()
            task = asyncio.create_task(consume(first))
            await first.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return await asyncio.to_thread(server.client_hung_up)

        assert run_bounded(main())


@BOTH
def test_no_keep_alive_connection_outlives_the_call(api: Api) -> None:
    with serve(stream(api.frames(["ok"]), end="keep")) as server:

        async def run() -> bool:
            await _drain(api.invoker(server))
            return await asyncio.to_thread(server.client_hung_up)

        assert run_bounded(run())


async def _drain(invoker: HttpInvoker) -> None:
    async with aclosing(invoker(HELLO, StreamOptions())) as events:
        async for _ in events:
            pass


def test_a_shared_client_is_used_and_left_open() -> None:
    with serve(stream(openai_frames(["one"])), stream(openai_frames(["two"]))) as server:

        async def run() -> list[str]:
            texts = []
            async with httpx.AsyncClient() as client:
                invoker = OPENAI.invoker(server, client=client)
                for _ in range(2):
                    async with aclosing(invoker(HELLO, StreamOptions())) as events:
                        texts += [e.delta async for e in events if isinstance(e, StreamTextDelta)]
                assert not client.is_closed
            return texts

        assert run_bounded(run()) == ["one", "two"]


# --- configuration ------------------------------------------------------------------------------


def test_openai_reads_key_and_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(stream(openai_frames(["ok"]))) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1/")
        events = collect(openai_compatible(model="m", **FAST))
        [request] = server.received
    assert isinstance(events[-1], StreamDone)
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-env"


def test_anthropic_reads_key_and_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(stream(anthropic_frames(["ok"]))) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        events = collect(anthropic("claude-test", **FAST))
        [request] = server.received
    assert isinstance(events[-1], StreamDone)
    assert request.headers["x-api-key"] == "ak-env"


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with serve(stream(openai_frames(["ok"]))) as server:
        collect(OPENAI.invoker(server))
        [request] = server.received
    assert request.headers["authorization"] == "Bearer sk-test"


def test_a_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with serve(stream(openai_frames(["ok"]))) as server:
        collect(openai_compatible(f"{server.url}/v1", "llama3", **FAST))
        [request] = server.received
    assert "authorization" not in request.headers


def test_official_hosts_need_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(InvokerConfigError, match="OPENAI_API_KEY"):
        openai_compatible(model="gpt-4o-mini")
    with pytest.raises(InvokerConfigError, match="ANTHROPIC_API_KEY"):
        anthropic("claude-test")


def test_bad_settings_are_refused_up_front() -> None:
    with pytest.raises(InvokerConfigError, match="not an http"):
        openai_compatible("localhost:11434/v1", "m")
    with pytest.raises(InvokerConfigError, match="timeout"):
        openai_compatible("http://127.0.0.1:9/v1", "m", timeout=0)
    with pytest.raises(InvokerConfigError, match="max_retries"):
        anthropic("claude-test", "k", base_url="http://127.0.0.1:9", max_retries=-1)
    with pytest.raises(InvokerConfigError, match="no model"):
        openai_compatible("http://127.0.0.1:9/v1")(HELLO, StreamOptions())


def test_the_repr_does_not_show_the_key() -> None:
    invoker = openai_compatible("http://127.0.0.1:9/v1", "m", "sk-secret")
    assert "sk-secret" not in repr(invoker)
    assert "m" in repr(invoker)


# --- end to end through summarize ---------------------------------------------------------------

HISTORY = [
    {"role": "user", "blocks": [{"kind": "text", "text": "Fix the failing test in parser.py"}]},
    {
        "role": "assistant",
        "blocks": [
            {"kind": "tool_call", "id": "c1", "name": "run_tests", "input": {"path": "tests"}},
        ],
    },
    {
        "role": "user",
        "blocks": [{"kind": "tool_result", "callId": "c1", "output": "1 failed", "isError": True}],
    },
    {
        "role": "assistant",
        "blocks": [
            {"kind": "tool_call", "id": "c2", "name": "read_file", "input": "parser.py"},
            {"kind": "tool_call", "id": "c3", "name": "read_file", "input": "test_parser.py"},
        ],
    },
    {
        "role": "user",
        "blocks": [
            {"kind": "tool_result", "callId": "c2", "output": "def parse(): ..."},
            {"kind": "tool_result", "callId": "c3", "output": "def test_parse(): ..."},
        ],
    },
    {"role": "assistant", "blocks": [{"kind": "text", "text": "Fixed: parse now strips input."}]},
]


@BOTH
def test_summarize_end_to_end(api: Api) -> None:
    with serve(stream(api.frames(["The user ", "fixed parser.py."]))) as server:
        turn = run_bounded(summarize(HISTORY, api.invoker(server)))
        [request] = server.received
    [block] = turn.blocks
    assert isinstance(block, TextBlock)
    assert block.text == f"{SUMMARY_HEADING}\nThe user fixed parser.py."
    assert "Fix the failing test in parser.py" in str(request.body["messages"])


@BOTH
def test_summarize_raises_the_server_message(api: Api) -> None:
    with serve(error(500, api.error_body("quota exhausted"))) as server:
        invoker = api.invoker(server, max_retries=1)
        with pytest.raises(CondensationError, match="quota exhausted"):
            run_bounded(summarize(HISTORY, invoker))


# --- extractive ---------------------------------------------------------------------------------


def run_extractive(
    conversation: Conversation, max_chars: int = 2000, options: StreamOptions | None = None
) -> list[StreamEvent]:
    async def run() -> list[StreamEvent]:
        channel = extractive(max_chars)(conversation, options or StreamOptions())
        return [event async for event in channel]

    return run_bounded(run())


def transcript_of(turns: Sequence[Any]) -> Conversation:
    text = render_transcript(turns)
    return Conversation(system="x", turns=(Turn(role="user", blocks=(TextBlock(text=text),)),))


def summary_text(events: list[StreamEvent]) -> str:
    done = events[-1]
    assert isinstance(done, StreamDone)
    [block] = done.turn.blocks
    assert isinstance(block, TextBlock)
    deltas = "".join(e.delta for e in events if isinstance(e, StreamTextDelta))
    assert deltas == block.text
    return block.text


def test_extractive_keeps_request_tools_errors_and_answer() -> None:
    text = summary_text(run_extractive(transcript_of(HISTORY)))
    assert text == (
        "First request: Fix the failing test in parser.py\n"
        "Tool calls (3): read_file (2), run_tests (1)\n"
        'Tool errors (1): run_tests [c1]: "1 failed"\n'
        "Last answer: Fixed: parse now strips input."
    )


def test_extractive_is_deterministic_and_estimates_usage() -> None:
    conversation = transcript_of(HISTORY)
    first, second = run_extractive(conversation), run_extractive(conversation)
    assert first == second
    done = first[-1]
    assert isinstance(done, StreamDone)
    assert done.usage.input_tokens > 0
    assert done.usage.output_tokens == -(-len(summary_text(first)) // 4)


@pytest.mark.parametrize("max_chars", [1, 5, 20, 60, 100, 150])
def test_extractive_respects_max_chars(max_chars: int) -> None:
    long_history = [
        {"role": "user", "blocks": [{"kind": "text", "text": "please " * 200}]},
        *HISTORY[1:5],
        {"role": "assistant", "blocks": [{"kind": "text", "text": "done " * 300}]},
    ]
    text = summary_text(run_extractive(transcript_of(long_history), max_chars))
    assert 0 < len(text) <= max_chars
    if max_chars >= 100:
        assert "First request: please" in text
        assert "Last answer: done" in text


def test_extractive_max_output_tokens_lowers_the_bound() -> None:
    events = run_extractive(transcript_of(HISTORY), options=StreamOptions(max_output_tokens=10))
    assert len(summary_text(events)) <= 40


@pytest.mark.parametrize(
    "text",
    ["just some notes\nwith no sections", "[user]\n", "   ", "", "[assistant]\nonly an answer"],
)
def test_extractive_copes_with_unexpected_transcripts(text: str) -> None:
    conversation = Conversation(turns=(Turn(role="user", blocks=(TextBlock(text=text),)),))
    summary = summary_text(run_extractive(conversation, 80))
    assert summary.strip()
    assert len(summary) <= 80


TRANSCRIPT_PIECES = st.sampled_from(
    [
        *("[user]", "[assistant]", "\n", "\n\n", " ", "hello", "(thinking) t", "[image x]"),
        *("-> tool call ls [c1]: {}", '<- tool error [c1]: "no"', "<- tool result [c2]: 1"),
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(st.text(), st.lists(TRANSCRIPT_PIECES).map("".join)),
    max_chars=st.integers(1, 300),
)
def test_extractive_always_answers_within_bounds(text: str, max_chars: int) -> None:
    conversation = Conversation(turns=(Turn(role="user", blocks=(TextBlock(text=text),)),))
    summary = summary_text(run_extractive(conversation, max_chars))
    assert summary.strip()
    assert len(summary) <= max_chars
    assert summary_text(run_extractive(conversation, max_chars)) == summary


def test_extractive_reads_a_conversation_without_a_transcript() -> None:
    conversation = Conversation(turns=tuple(parse_turn(turn) for turn in HISTORY))
    summary = summary_text(run_extractive(conversation))
    assert "Fix the failing test" in summary
    assert "Fixed: parse now strips input." in summary


def test_extractive_summarizes_end_to_end() -> None:
    turn = run_bounded(summarize(HISTORY, extractive(300)))
    [block] = turn.blocks
    assert isinstance(block, TextBlock)
    assert block.text.startswith(f"{SUMMARY_HEADING}\nFirst request: Fix the failing test")
    assert "read_file (2)" in block.text
    assert len(block.text) <= len(SUMMARY_HEADING) + 1 + 300


def many_rounds(rounds: int) -> list[dict[str, Any]]:
    """A long history: each round a request, two tool calls (one failing) and an answer."""
    turns: list[dict[str, Any]] = []
    for n in range(rounds):
        calls = [
            {"kind": "tool_call", "id": f"a{n}", "name": "bash", "input": {"cmd": f"make {n}"}},
            {"kind": "tool_call", "id": f"b{n}", "name": f"tool_{n % 3}", "input": n},
        ]
        results = [
            {"kind": "tool_result", "callId": f"a{n}", "output": "x" * 300},
            {"kind": "tool_result", "callId": f"b{n}", "output": "no", "isError": n % 10 == 0},
        ]
        turns += [
            {"role": "user", "blocks": [{"kind": "text", "text": f"Request number {n}"}]},
            {"role": "assistant", "blocks": calls},
            {"role": "user", "blocks": results},
            {"role": "assistant", "blocks": [{"kind": "text", "text": f"Answer number {n}"}]},
        ]
    return turns


@pytest.mark.parametrize("max_chars", [2000, 120])
def test_extractive_merges_chunk_summaries_without_nesting_or_losing_counts(
    max_chars: int,
) -> None:
    history = many_rounds(60)
    turn = run_bounded(summarize(history, extractive(max_chars), budget_tokens=1500))
    [block] = turn.blocks
    assert isinstance(block, TextBlock)
    assert block.text.count(SUMMARY_HEADING) == 1
    assert block.text.count("First request:") == 1
    assert "Tool calls (120): " in block.text  # every chunk's calls, even when names were cut
    if max_chars == 2000:
        assert block.text.startswith(f"{SUMMARY_HEADING}\nFirst request: Request number 0\n")
        assert "Latest request: Request number 59" in block.text
        assert "bash (60)" in block.text
        assert "Tool errors (6): " in block.text
        assert block.text.endswith("Last answer: Answer number 59")


def test_extractive_reads_an_earlier_summary_as_a_summary() -> None:
    earlier = f"{SUMMARY_HEADING}\nFirst request: Build it\nTool calls (7): make (4), ls (2), c…"
    history = [
        {"role": "user", "blocks": [{"kind": "text", "text": earlier}]},
        *HISTORY,
    ]
    text = summary_text(run_extractive(transcript_of(history)))
    assert text.startswith("First request: Build it\nLatest request: Fix the failing test")
    assert "Tool calls (10): make (4), ls (2), read_file (2), run_tests (1), others (1)" in text


def test_extractive_refuses_a_bad_bound() -> None:
    with pytest.raises(InvokerConfigError):
        extractive(0)


# --- the package --------------------------------------------------------------------------------


def test_exports_are_exactly_the_intended_names_sorted() -> None:
    assert memstore.invokers.__all__ == [
        "InvokerConfigError",
        "anthropic",
        "extractive",
        "openai_compatible",
    ]
    for name in memstore.invokers.__all__:
        assert getattr(memstore.invokers, name) is not None


def test_memstore_and_extractive_work_without_httpx() -> None:
    script = """
import sys
sys.modules["httpx"] = None  # makes `import httpx` fail
import asyncio, memstore, memstore.invokers
turn = asyncio.run(memstore.summarize(
    [{"role": "user", "blocks": [{"kind": "text", "text": "hi"}]}], memstore.invokers.extractive()
))
assert "hi" in turn.blocks[0].text
try:
    memstore.invokers.anthropic
except ImportError as exc:
    assert "pip install 'httpx>=0.27' (the 'models' extra of memstore-sql)" in str(exc), exc
else:
    raise AssertionError("anthropic imported without httpx")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


async def _lines(text: str) -> AsyncIterator[str]:
    for line in text.splitlines():
        yield line


def test_sse_framing() -> None:
    text = ": comment\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\nid: 7\r\nretry: 5\r\n\r\ndata: tail"

    async def run() -> list[ServerSentEvent]:
        return [event async for event in iter_sse(_lines(text))]

    assert run_bounded(run()) == [ServerSentEvent("a", "1\n2"), ServerSentEvent("message", "tail")]
