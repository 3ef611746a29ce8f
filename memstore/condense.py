"""Context condensation: estimate a history's tokens, decide when to condense, cut, summarize.

Counting follows JavaScript: string lengths are UTF-16 code units, serialized values are
`JSON.stringify` output. Every function accepts Turn models or plain JSON dicts.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager
from typing import Any

from pydantic import TypeAdapter, ValidationError

from memstore import jsjson
from memstore.errors import CondensationError
from memstore.types import (
    Channel,
    CompactionPolicy,
    Conversation,
    ModelCard,
    ModelInvoker,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamOptions,
    StreamTextDelta,
    TextBlock,
    Turn,
    TurnLike,
    turn_to_json,
)

__all__ = [
    "DISTILL_PREAMBLE",
    "SUMMARY_HEADING",
    "compact",
    "estimate_context_tokens",
    "find_cut_point",
    "render_transcript",
    "should_compact",
    "summarize",
]

SUMMARY_HEADING = "[condensed earlier context]"
"""The first line of every summary turn, so readers and models can tell it from a real turn."""

DISTILL_PREAMBLE = (
    "You condense the earlier part of a conversation between a user and an AI assistant so that "
    "the assistant can continue the work without the full history. Write a faithful, compact "
    "summary in plain text: the user's goals and constraints, decisions made and why, facts "
    "learned (file names, identifiers, numbers, errors), tool calls made and their outcomes, and "
    "any open questions or next steps. Do not invent anything; do not address the user."
)
"""The system prompt of every summarization call."""

CHARS_PER_TOKEN = 4
TOKENS_PER_TURN = 4
_STREAM_EVENT: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)


def _utf16_length(text: str) -> int:
    """JavaScript's `text.length`: astral characters count two, lone surrogates one."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _serialized_length(value: Any) -> int:
    return _utf16_length(jsjson.dumps(value))


def _block_chars(block: Mapping[str, Any]) -> int:
    kind = block.get("kind")
    if kind in ("text", "thinking"):
        return _utf16_length(block.get("text", ""))
    if kind == "tool_call":
        serialized = _serialized_length(block["input"]) if "input" in block else 0
        return _utf16_length(block.get("name", "")) + serialized
    if kind == "tool_result":
        return _serialized_length(block["output"]) if "output" in block else 0
    if kind == "image":
        return _utf16_length(block.get("dataBase64", ""))
    return 0


def estimate_context_tokens(messages: Iterable[TurnLike]) -> int:
    """A cheap token estimate: characters / 4, rounded up, plus 4 per turn for framing."""
    chars = 0
    turns = 0
    for turn in messages:
        turns += 1
        chars += sum(_block_chars(block) for block in turn_to_json(turn).get("blocks", ()))
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_TURN * turns


def should_compact(
    messages: Sequence[TurnLike], model: ModelCard, cfg: CompactionPolicy | None = None
) -> bool:
    """Whether the history has reached `trigger_ratio` of the model's window.

    A card whose window is not positive never triggers condensation.
    """
    if model.context_window <= 0:
        return False
    policy = cfg or CompactionPolicy()
    return estimate_context_tokens(messages) >= model.context_window * policy.trigger_ratio


def _has_tool_result(turn: TurnLike) -> bool:
    return any(block.get("kind") == "tool_result" for block in turn_to_json(turn).get("blocks", ()))


def find_cut_point(messages: Sequence[TurnLike], keep_recent: int) -> int:
    """The index of the first turn kept verbatim; never splits a tool_call from its result.

    0 means nothing is condensed, `len(messages)` means everything is.
    """
    start = min(max(len(messages) - keep_recent, 0), len(messages))
    while start < len(messages) and _has_tool_result(messages[start]):
        start += 1
    return start


def _render_block(block: Mapping[str, Any]) -> str:
    kind = block.get("kind")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return f"(thinking) {block.get('text', '')}"
    if kind == "tool_call":
        arguments = jsjson.dumps(block.get("input"))
        return f"-> tool call {block.get('name')} [{block.get('id')}]: {arguments}"
    if kind == "tool_result":
        status = "error" if block.get("isError") else "result"
        return f"<- tool {status} [{block.get('callId')}]: {jsjson.dumps(block.get('output'))}"
    if kind == "image":
        return f"[image {block.get('mediaType')}, {len(block.get('dataBase64', ''))} base64 chars]"
    return f"[{kind} block]"


def render_transcript(messages: Iterable[TurnLike]) -> str:
    """A plain-text transcript of the turns, one section per turn, for the summarizing model."""
    sections = []
    for turn in messages:
        wire = turn_to_json(turn)
        body = "\n".join(_render_block(block) for block in wire.get("blocks", ()))
        sections.append(f"[{wire.get('role')}]\n{body}")
    return "\n\n".join(sections)


async def _events(channel: Channel) -> AsyncGenerator[StreamEvent, None]:
    """The channel's events, validated; the channel is closed however iteration ends."""
    if isinstance(channel, AsyncIterable):
        iterator = aiter(channel)
        try:
            async for event in iterator:
                yield _STREAM_EVENT.validate_python(event)
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()
    else:
        with closing_if_possible(iter(channel)) as events:
            for event in events:
                yield _STREAM_EVENT.validate_python(event)


@contextmanager
def closing_if_possible(iterator: Iterator[Any]) -> Iterator[Iterator[Any]]:
    """Yield `iterator`, then close it if it is a generator (or anything with `close`)."""
    try:
        yield iterator
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def _turn_text(turn: Turn) -> str:
    return "".join(block.text for block in turn.blocks if isinstance(block, TextBlock))


async def _drain(invoke: ModelInvoker, conversation: Conversation, options: StreamOptions) -> str:
    """The model's reply: the `done` turn's text, or the concatenated text deltas without one."""
    deltas: list[str] = []
    async with aclosing(_events(invoke(conversation, options))) as events:
        async for event in events:
            if isinstance(event, StreamTextDelta):
                deltas.append(event.delta)
            elif isinstance(event, StreamError):
                raise CondensationError(f"the model reported an error: {event.message}")
            elif isinstance(event, StreamDone):
                done_text = _turn_text(event.turn)
                if done_text.strip():
                    return done_text
                break
    return "".join(deltas)


async def summarize(
    messages: Sequence[TurnLike], invoke: ModelInvoker, options: StreamOptions | None = None
) -> Turn:
    """Distill turns into one user-role turn headed `[condensed earlier context]`.

    Raises:
        CondensationError: the model reported an error, raised, or returned an empty summary.
    """
    conversation = Conversation(
        system=DISTILL_PREAMBLE,
        turns=(Turn(role="user", blocks=(TextBlock(text=render_transcript(messages)),)),),
    )
    try:
        summary = await _drain(invoke, conversation, options or StreamOptions())
    except CondensationError:
        raise
    except ValidationError as exc:
        raise CondensationError(f"the model sent an invalid stream event: {exc}") from exc
    except Exception as exc:
        raise CondensationError(f"the model call failed: {exc!r}") from exc
    if not summary.strip():
        raise CondensationError("the model returned an empty summary")
    return Turn(role="user", blocks=(TextBlock(text=f"{SUMMARY_HEADING}\n{summary}"),))


async def compact(
    messages: Sequence[TurnLike],
    model: ModelCard,
    cfg: CompactionPolicy | None,
    invoke: ModelInvoker,
) -> Sequence[TurnLike]:
    """`[summary, *tail]`, or `messages` itself when there is nothing to condense.

    The model card is reserved, as in the original. On error the exception propagates and
    `messages` is untouched.
    """
    del model
    policy = cfg or CompactionPolicy()
    cut = find_cut_point(messages, policy.keep_recent)
    if cut == 0:
        return messages
    summary = await summarize(messages[:cut], invoke)
    return [summary, *messages[cut:]]
