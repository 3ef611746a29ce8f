"""Context condensation: estimate a history's tokens, decide when to condense, cut, summarize.

Counting follows JavaScript: string lengths are UTF-16 code units, serialized values are
`JSON.stringify` output. Every function accepts Turn models or plain JSON dicts.

A prefix too large for the summarizing model's window is condensed in chunks that fit, and then
the chunk summaries are merged (in rounds, if they do not fit one request either): no request is
ever larger than the budget, by `estimate_context_tokens` of its transcript turn plus the preamble.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager
from typing import Any

from pydantic import TypeAdapter, ValidationError

from memstore.blocks import block_class, utf16_length
from memstore.errors import CondensationError, InvalidArgumentError
from memstore.estimate import CHARS_PER_TOKEN, TOKENS_PER_TURN, estimate_context_tokens
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
from memstore.usage import NodeUsage, estimate_with_usage

__all__ = [
    "DISTILL_PREAMBLE",
    "MERGE_PREAMBLE",
    "SUMMARY_HEADING",
    "check_window",
    "compact",
    "estimate_context_tokens",
    "fills_trigger",
    "find_cut_point",
    "minimum_budget",
    "minimum_window",
    "render_transcript",
    "request_budget",
    "should_compact",
    "stream_events",
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
"""The system prompt of every summarization call over turns."""

MERGE_PREAMBLE = (
    "You merge consecutive summaries of one conversation between a user and an AI assistant, "
    "given oldest first, into one summary so that the assistant can continue the work without the "
    "full history. Write a faithful, compact summary in plain text: the user's goals and "
    "constraints, decisions made and why, facts learned (file names, identifiers, numbers, "
    "errors), tool calls made and their outcomes, and any open questions or next steps; where a "
    "later summary supersedes an earlier one, keep the later. Do not invent anything; do not "
    "address the user."
)
"""The system prompt of the calls that merge chunk summaries of a prefix too large for one call."""

REPLY_SHARE = 4
"""Without a card's `max_output_tokens`, a quarter of the window is kept free for the reply."""
MIN_TRANSCRIPT_TOKENS = 64
"""A budget must leave at least this much transcript room next to the preamble, or it is refused."""
_SEPARATOR = "\n\n"
_STREAM_EVENT: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)


def should_compact(
    messages: Sequence[TurnLike],
    model: ModelCard,
    cfg: CompactionPolicy | None = None,
    *,
    usages: Sequence[NodeUsage | None] | None = None,
) -> bool:
    """Whether the history has reached `trigger_ratio` of the model's window, by the character
    rule (`estimate_context_tokens`) or, given `usages` (one `NodeUsage` or None per turn, else
    `InvalidArgumentError`), by the usage-aware estimate (`memstore.usage.estimate_with_usage`).
    A card whose window is not positive never triggers condensation."""
    if model.context_window <= 0:
        return False
    if usages is None:
        tokens = estimate_context_tokens(messages)
    else:
        tokens = estimate_with_usage(messages, usages)
    return fills_trigger(tokens, model, cfg)


def fills_trigger(tokens: int, model: ModelCard, cfg: CompactionPolicy | None = None) -> bool:
    """Whether a history of `tokens` (however estimated) has reached `trigger_ratio` of the
    model's window; a card whose window is not positive never triggers condensation."""
    if model.context_window <= 0:
        return False
    return tokens >= model.context_window * (cfg or CompactionPolicy()).trigger_ratio


def _has_tool_result(turn: TurnLike) -> bool:
    """`Turn.has_tool_result`, of a Turn or its wire form."""
    if isinstance(turn, Turn):
        return turn.has_tool_result
    return Turn.kinds_have_tool_result(block.get("kind") for block in turn.get("blocks", ()))


def find_cut_point(messages: Sequence[TurnLike], keep_recent: int) -> int:
    """The index of the first turn kept verbatim; never splits a tool_call from its result.

    0 means nothing is condensed, `len(messages)` means everything is.
    """
    start = min(max(len(messages) - keep_recent, 0), len(messages))
    while start < len(messages) and _has_tool_result(messages[start]):
        start += 1
    return start


def _render_block(block: Mapping[str, Any]) -> str:
    return block_class(block.get("kind")).transcript(block)


def render_transcript(messages: Iterable[TurnLike]) -> str:
    """A plain-text transcript of the turns, one section per turn, for the summarizing model."""
    sections = []
    for turn in messages:
        wire = turn_to_json(turn)
        body = "\n".join(_render_block(block) for block in wire.get("blocks", ()))
        sections.append(f"[{wire.get('role')}]\n{body}")
    return "\n\n".join(sections)


async def stream_events(channel: Channel) -> AsyncGenerator[StreamEvent, None]:
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
    async with aclosing(stream_events(invoke(conversation, options))) as events:
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


async def _distill(
    invoke: ModelInvoker, system: str, transcript: str, options: StreamOptions
) -> str:
    """One model call over one transcript; the reply text, never empty.

    Raises:
        CondensationError: the model reported an error, raised, or returned an empty summary.
    """
    conversation = Conversation(
        system=system, turns=(Turn(role="user", blocks=(TextBlock(text=transcript),)),)
    )
    try:
        summary = await _drain(invoke, conversation, options)
    except CondensationError:
        raise
    except ValidationError as exc:
        raise CondensationError(f"the model sent an invalid stream event: {exc}") from exc
    except Exception as exc:
        raise CondensationError(f"the model call failed: {exc!r}") from exc
    if not summary.strip():
        raise CondensationError("the model returned an empty summary")
    return summary


def _summary_turn(summary: str) -> Turn:
    return Turn(role="user", blocks=(TextBlock(text=f"{SUMMARY_HEADING}\n{summary}"),))


def _turn_groups(messages: Sequence[TurnLike]) -> list[list[TurnLike]]:
    """Consecutive turns split where `find_cut_point` may cut: never before a tool_result turn."""
    groups: list[list[TurnLike]] = []
    for turn in messages:
        if groups and _has_tool_result(turn):
            groups[-1].append(turn)
        else:
            groups.append([turn])
    return groups


def _transcript_room(budget_tokens: int, system: str) -> int:
    """The transcript length (UTF-16 units) a request under `system` may have within budget."""
    system_tokens = math.ceil(utf16_length(system) / CHARS_PER_TOKEN)
    return CHARS_PER_TOKEN * (budget_tokens - TOKENS_PER_TURN - system_tokens)


def minimum_budget() -> int:
    """The smallest `budget_tokens` `summarize` accepts: the longer preamble plus some room."""
    longest = max(utf16_length(DISTILL_PREAMBLE), utf16_length(MERGE_PREAMBLE))
    return math.ceil(longest / CHARS_PER_TOKEN) + TOKENS_PER_TURN + MIN_TRANSCRIPT_TOKENS


def _unit_prefix(text: str, units: int) -> str:
    """The longest prefix of `text` that is at most `units` UTF-16 code units long."""
    if text.isascii():
        return text[:units]
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


def _omission(count: int) -> str:
    return f"\n[... {count} characters omitted ...]\n"


def _fit_text(text: str, limit: int) -> str:
    """`text` if it is at most `limit` UTF-16 units, else its start and end around a marker.

    The marker (`[... N characters omitted ...]`) says how many units were cut; the result is
    never longer than `limit`, which must leave room for the marker itself.
    """
    total = utf16_length(text)
    if total <= limit:
        return text
    keep = limit - utf16_length(_omission(total))
    if keep < 0:
        raise ValueError(f"a limit of {limit} characters cannot hold the omission marker")
    head = _unit_prefix(text, (keep + 1) // 2)
    tail = _unit_prefix(text[::-1], keep // 2)[::-1]
    omitted = total - utf16_length(head) - utf16_length(tail)
    return f"{head}{_omission(omitted)}{tail}"


def _pack(pieces: Sequence[str], limit: int) -> list[list[str]]:
    """Consecutive pieces in as few runs as greedily fit `limit` units once joined.

    Every piece must fit alone; there is always at least one run.
    """
    runs: list[list[str]] = [[]]
    size = 0
    for piece in pieces:
        length = utf16_length(piece)
        if runs[-1] and size + len(_SEPARATOR) + length > limit:
            runs.append([])
        size = size + len(_SEPARATOR) + length if runs[-1] else length
        runs[-1].append(piece)
    return runs


async def _summarize_chunks(
    messages: Sequence[TurnLike], invoke: ModelInvoker, options: StreamOptions, budget: int
) -> list[str]:
    """One summary per chunk of whole turn groups that fits `budget`; an oversized group is cut."""
    room = _transcript_room(budget, DISTILL_PREAMBLE)
    pieces = [_fit_text(render_transcript(group), room) for group in _turn_groups(messages)]
    return [
        await _distill(invoke, DISTILL_PREAMBLE, _SEPARATOR.join(run), options)
        for run in _pack(pieces, room)
    ]


async def _merge_round(
    summaries: Sequence[str], invoke: ModelInvoker, options: StreamOptions, budget: int
) -> list[str]:
    """Consecutive summaries merged, as many per request as fit; a lone one passes through.

    Each is cut to half the room first, so any two fit one request and every run but the
    last holds two or more: each round at least halves the count, and the rounds end.
    """
    room = _transcript_room(budget, MERGE_PREAMBLE)
    share = (room - len(_SEPARATOR)) // 2
    pieces = [_fit_text(render_transcript([_summary_turn(text)]), share) for text in summaries]
    merged: list[str] = []
    start = 0
    for run in _pack(pieces, room):
        if len(run) == 1:
            merged.append(summaries[start])
        else:
            transcript = _SEPARATOR.join(run)
            merged.append(await _distill(invoke, MERGE_PREAMBLE, transcript, options))
        start += len(run)
    return merged


async def _distill_bounded(
    messages: Sequence[TurnLike], invoke: ModelInvoker, options: StreamOptions, budget: int
) -> str:
    """Summarize chunks that fit `budget`, then merge their summaries until one remains."""
    summaries = await _summarize_chunks(messages, invoke, options, budget)
    while len(summaries) > 1:
        summaries = await _merge_round(summaries, invoke, options, budget)
    return summaries[0]


async def summarize(
    messages: Sequence[TurnLike],
    invoke: ModelInvoker,
    options: StreamOptions | None = None,
    *,
    budget_tokens: int | None = None,
) -> Turn:
    """Distill turns into one user-role turn headed `[condensed earlier context]`.

    Args:
        messages: the turns to condense.
        invoke: the summarizing model.
        options: passed to every model call.
        budget_tokens: the most tokens one request may hold (its transcript turn plus the
            preamble, by `estimate_context_tokens`); larger input is summarized in chunks of
            whole turns (a tool_result stays with its call; a turn too large alone is cut) and
            the chunk summaries merged. None: one request, however large.

    Raises:
        CondensationError: a model call reported an error, raised, or returned an empty summary;
            or `budget_tokens` is below `minimum_budget()`.
    """
    options = options or StreamOptions()
    if budget_tokens is None:
        summary = await _distill(invoke, DISTILL_PREAMBLE, render_transcript(messages), options)
        return _summary_turn(summary)
    if budget_tokens < minimum_budget():
        raise CondensationError(
            f"a budget of {budget_tokens} tokens cannot hold the summarizing prompt; "
            f"give at least {minimum_budget()}"
        )
    return _summary_turn(await _distill_bounded(messages, invoke, options, budget_tokens))


def _reply_reserve(model: ModelCard) -> int:
    """Tokens kept free for the reply: the card's output limit or a quarter window, at most half."""
    wanted = model.max_output_tokens or model.context_window // REPLY_SHARE
    return min(wanted, model.context_window // 2)


def request_budget(model: ModelCard) -> int | None:
    """The tokens one summarizing request may hold on this card; None if the window is too small."""
    budget = model.context_window - _reply_reserve(model)
    return budget if budget >= minimum_budget() else None


def check_window(model: ModelCard) -> None:
    """Refuse a card whose window cannot hold a summarizing request and its reply.

    Raises:
        InvalidArgumentError: naming the window and the smallest one that works.
    """
    if request_budget(model) is None:
        raise InvalidArgumentError(
            f"a context window of {model.context_window} tokens cannot hold the summarizing "
            f"request and its reply; give at least {minimum_window(model.max_output_tokens)}"
        )


def minimum_window(max_output_tokens: int | None = None) -> int:
    """The smallest context window whose card (with this reply limit) `request_budget` accepts."""
    low, high = 1, 2 * (minimum_budget() + (max_output_tokens or 0))
    while low < high:  # the budget never shrinks as the window grows
        middle = (low + high) // 2
        card = ModelCard(id="", context_window=middle, max_output_tokens=max_output_tokens)
        if request_budget(card) is None:
            low = middle + 1
        else:
            high = middle
    return low


async def compact(
    messages: Sequence[TurnLike],
    model: ModelCard,
    cfg: CompactionPolicy | None,
    invoke: ModelInvoker,
) -> Sequence[TurnLike]:
    """`[summary, *tail]`, or `messages` itself when there is nothing to condense.

    `model` is the summarizing model's card: every request fits its window with room for the
    reply (see `summarize`'s `budget_tokens`), and the calls carry its id and reply limit. A
    window too small to hold even the preamble is treated as unknown: one request, as before.
    On error the exception propagates and `messages` is untouched.
    """
    policy = cfg or CompactionPolicy()
    cut = find_cut_point(messages, policy.keep_recent)
    if cut == 0:
        return messages
    budget = request_budget(model)
    reply = model.max_output_tokens if budget is None else model.context_window - budget
    options = StreamOptions(model=model.id, max_output_tokens=reply)
    summary = await summarize(messages[:cut], invoke, options, budget_tokens=budget)
    return [summary, *messages[cut:]]
