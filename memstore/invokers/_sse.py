"""A Server-Sent Events decoder over text lines, as the HTML living standard defines the format."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

__all__ = ["ServerSentEvent", "iter_sse"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its type (`message` unless named) and its data lines, joined."""

    event: str
    data: str


async def iter_sse(lines: AsyncIterator[str]) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of a stream of lines; `lines` is closed however iteration ends.

    An event still pending at end of stream is dispatched too (the standard drops it), because
    some servers omit the blank line after their last event; a truncated one fails to parse later.
    """
    event = ""
    data: list[str] = []
    try:
        async for raw in lines:
            line = raw.rstrip("\r\n")
            if not line:
                if data:
                    yield ServerSentEvent(event or "message", "\n".join(data))
                event, data = "", []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
        if data:
            yield ServerSentEvent(event or "message", "\n".join(data))
    finally:
        aclose = getattr(lines, "aclose", None)
        if aclose is not None:
            await aclose()
