"""An offline invoker that condenses a transcript by extraction: no model, no network.

It reads the transcript `render_transcript` wrote (sections `[user]` / `[assistant]`, tool calls as
`-> tool call NAME [ID]: INPUT`, results as `<- tool result [ID]: ...` or `<- tool error [ID]: ...`)
and keeps the first request, the latest one, the tool calls made and the last answer. A section
that is itself a summary (headed `[condensed earlier context]`: a chunk's summary being merged, or
an earlier compaction) is read back line by line, so merged summaries count every chunk's tool
calls and never nest one summary's heading inside another.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from memstore.condense import SUMMARY_HEADING, render_transcript
from memstore.estimate import CHARS_PER_TOKEN, estimate_context_tokens
from memstore.invokers._config import InvokerConfigError
from memstore.types import (
    Conversation,
    StreamDone,
    StreamEvent,
    StreamOptions,
    StreamTextDelta,
    TextBlock,
    Turn,
    Usage,
)

__all__ = ["ExtractiveInvoker", "extractive"]

_SECTION = re.compile(r"(?:^|\n\n)\[(user|assistant)\](?:\n|$)")
_CALL = re.compile(r"-> tool call (.*?) \[(.*?)\]: (.*)")
_RESULT = re.compile(r"<- tool (result|error) \[(.*?)\]: (.*)")
_SPACE = re.compile(r"\s+")
_LABELLED = re.compile(r"([A-Z][a-z]+(?: [a-z]+)?)(?: \((\d+)\))?: (.*)")
_COUNTED = re.compile(r"(.+) \((\d+)\)")
_OMITTED = re.compile(r"\[\.\.\. \d+ characters omitted \.\.\.\]")
_ELLIPSIS = "…"
_OTHERS = "others"  # the calls an earlier summary counted without naming their tool
_MIN_VALUE = 24  # below this a cut value says little: drop a less important line instead


def extractive(max_chars: int = 2000) -> ExtractiveInvoker:
    """A deterministic ModelInvoker that summarizes the transcript it is given by extraction.

    Args:
        max_chars: the longest summary it writes; `StreamOptions.max_output_tokens` may lower it.

    Raises:
        InvokerConfigError: `max_chars` is not a positive integer.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise InvokerConfigError(f"max_chars must be a positive integer, got {max_chars!r}")
    return ExtractiveInvoker(max_chars)


class ExtractiveInvoker:
    """Summarizes by extraction; build it with `extractive`."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars

    def __repr__(self) -> str:
        return f"ExtractiveInvoker(max_chars={self.max_chars})"

    def __call__(
        self, conversation: Conversation, options: StreamOptions
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the summary line by line, then the whole turn with estimated usage."""
        budget = self.max_chars
        if options.max_output_tokens:
            budget = max(1, min(budget, options.max_output_tokens * CHARS_PER_TOKEN))
        summary = summarize_transcript(_transcript(conversation), budget)
        system = len(conversation.system or "")
        usage = Usage(
            input_tokens=estimate_context_tokens(conversation.turns)
            + math.ceil(system / CHARS_PER_TOKEN),
            output_tokens=math.ceil(len(summary) / CHARS_PER_TOKEN),
        )
        return _stream(summary, usage)


async def _stream(summary: str, usage: Usage) -> AsyncGenerator[StreamEvent, None]:
    for line in summary.splitlines(keepends=True):
        yield StreamTextDelta(delta=line)
    yield StreamDone(turn=Turn(role="assistant", blocks=(TextBlock(text=summary),)), usage=usage)


def _transcript(conversation: Conversation) -> str:
    """The last user turn's text (what `summarize` sends), or else the whole conversation."""
    for turn in reversed(conversation.turns):
        if turn.role == "user":
            text = "".join(block.text for block in turn.blocks if isinstance(block, TextBlock))
            if text.strip():
                return text
            break
    return render_transcript(conversation.turns)


@dataclass(frozen=True)
class _Line:
    """One line of the summary: a label, a value that may be cut, and how much it matters."""

    rank: int
    label: str
    value: str


@dataclass
class _Digest:
    """What the transcript holds, in order of appearance."""

    requests: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    names: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    # Calls and errors an earlier summary counted but no longer names (its list was cut).
    unnamed_calls: int = 0
    unnamed_errors: int = 0


def summarize_transcript(transcript: str, max_chars: int) -> str:
    """A non-empty summary of at most `max_chars` characters; the same input, the same output."""
    digest = _digest(transcript)
    lines = _lines(digest)
    if not lines:
        excerpt = _squeeze(transcript)
        label = "Transcript excerpt: " if excerpt else ""
        lines = [_Line(0, label, excerpt or "(the transcript to condense was empty)")]
    return _fit(lines, max_chars)


def _digest(transcript: str) -> _Digest:
    """Requests, answers, tool calls and errors, read section by section."""
    digest = _Digest()
    parts = _SECTION.split(transcript)
    sections = [(None, parts[0]), *zip(parts[1::2], parts[2::2], strict=True)]
    for role, body in sections:
        if role == "user" and body.startswith(f"{SUMMARY_HEADING}\n"):
            _read_summary(digest, body[len(SUMMARY_HEADING) + 1 :])
            continue
        texts: list[str] = []
        for line in body.split("\n"):
            if call := _CALL.fullmatch(line):
                name, call_id = call.group(1), call.group(2)
                digest.calls[name] += 1
                digest.names[call_id] = name
            elif result := _RESULT.fullmatch(line):
                if result.group(1) == "error":
                    name = digest.names.get(result.group(2), "a tool")
                    digest.errors.append(f"{name} [{result.group(2)}]: {result.group(3)}")
            elif not line.startswith("(thinking) "):
                texts.append(line)
        text = _squeeze("\n".join(texts))
        if text:
            target = {"user": digest.requests, "assistant": digest.answers}.get(role or "")
            (digest.other if target is None else target).append(text)
    return digest


def _read_summary(digest: _Digest, summary: str) -> None:
    """Add what an earlier summary (of this invoker's making, or any text) says to `digest`."""
    loose: list[str] = []
    for line in summary.split("\n"):
        labelled = _LABELLED.fullmatch(line)
        label, count, value = labelled.groups() if labelled else ("", None, line)
        if label in ("First request", "Latest request"):
            digest.requests.append(value)
        elif label == "Last answer":
            digest.answers.append(value)
        elif label in ("Context", "Transcript excerpt"):
            digest.other.append(value)
        elif label == "Tool calls" and count is not None:
            named = [_COUNTED.fullmatch(part) for part in value.split(", ")]
            found = [(match.group(1), int(match.group(2))) for match in named if match]
            for name, calls in found:
                if name != _OTHERS:
                    digest.calls[name] += calls
            digest.unnamed_calls += int(count) - sum(
                calls for name, calls in found if name != _OTHERS
            )
        elif label == "Tool errors" and count is not None:
            listed = [part for part in value.split("; ") if not part.endswith(_ELLIPSIS)]
            digest.errors.extend(listed)
            digest.unnamed_errors += int(count) - len(listed)
        elif not _OMITTED.fullmatch(line):
            loose.append(line)
    if text := _squeeze("\n".join(loose)):
        digest.other.append(text)


def _lines(digest: _Digest) -> list[_Line]:
    """The summary's lines in reading order, each with its rank (0 is kept longest)."""
    lines: list[_Line] = []
    if digest.requests:
        lines.append(_Line(0, "First request: ", digest.requests[0]))
        if len(digest.requests) > 1 and digest.requests[-1] != digest.requests[0]:
            lines.append(_Line(4, "Latest request: ", digest.requests[-1]))
    elif digest.other:
        lines.append(_Line(0, "Context: ", digest.other[0]))
    if digest.calls or digest.unnamed_calls > 0:
        named = [f"{name} ({count})" for name, count in digest.calls.most_common()]
        if digest.unnamed_calls > 0:
            named.append(f"{_OTHERS} ({digest.unnamed_calls})")
        total = digest.calls.total() + max(digest.unnamed_calls, 0)
        lines.append(_Line(2, f"Tool calls ({total}): ", ", ".join(named)))
    if digest.errors or digest.unnamed_errors > 0:
        total = len(digest.errors) + max(digest.unnamed_errors, 0)
        lines.append(_Line(3, f"Tool errors ({total}): ", "; ".join(digest.errors)))
    if digest.answers:
        lines.append(_Line(1, "Last answer: ", digest.answers[-1]))
    return lines


def _squeeze(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _fit(lines: list[_Line], max_chars: int) -> str:
    """The lines within `max_chars`: the lowest-ranked go first, then values are cut evenly."""
    lines = list(lines)
    while len(lines) > 1 and _room(lines, max_chars) < sum(
        min(len(line.value), _MIN_VALUE) for line in lines
    ):
        lines.remove(max(lines, key=lambda line: line.rank))
    room = _room(lines, max_chars)
    if room < 1:  # not even the label fits: the most important value alone, cut
        return _cut(lines[0].value, max_chars)
    lengths = [len(line.value) for line in lines]
    low, high = 0, max(lengths)
    while low < high:  # the largest cap whose cut values fit the room
        middle = (low + high + 1) // 2
        if sum(min(length, middle) for length in lengths) <= room:
            low = middle
        else:
            high = middle - 1
    return "\n".join(line.label + _cut(line.value, low) for line in lines)


def _room(lines: list[_Line], max_chars: int) -> int:
    """What `max_chars` leaves for the values once labels and line breaks are written."""
    return max_chars - sum(len(line.label) for line in lines) - (len(lines) - 1)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + _ELLIPSIS
