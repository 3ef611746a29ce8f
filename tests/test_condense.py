from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memstore import (
    SUMMARY_HEADING,
    CompactionPolicy,
    CondensationError,
    Conversation,
    ModelCard,
    StreamDone,
    StreamEvent,
    StreamOptions,
    StreamTextDelta,
    TextBlock,
    Turn,
    TurnLike,
    compact,
    estimate_context_tokens,
    find_cut_point,
    parse_turn,
    should_compact,
    summarize,
)
from memstore.condense import DISTILL_PREAMBLE

from .conftest import LEGACY_FILES, expected_for, read_vectors
from .legacy import read_legacy_session

ESTIMATES = read_vectors("estimate.jsonl")
CUTS = read_vectors("cut.jsonl")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def tool_exchange(n: int) -> list[dict[str, Any]]:
    call = {"kind": "tool_call", "id": f"c{n}", "name": "ls", "input": {}}
    result = {"kind": "tool_result", "callId": f"c{n}", "output": "ok"}
    return [{"role": "assistant", "blocks": [call]}, {"role": "user", "blocks": [result]}]


@pytest.mark.parametrize("vector", ESTIMATES, ids=range(len(ESTIMATES)))
def test_estimate_vectors(vector: dict[str, Any]) -> None:
    assert estimate_context_tokens(vector["turns"]) == vector["tokens"]
    assert estimate_context_tokens([parse_turn(t) for t in vector["turns"]]) == vector["tokens"]


@pytest.mark.parametrize("vector", CUTS, ids=range(len(CUTS)))
def test_cut_vectors(vector: dict[str, Any]) -> None:
    assert find_cut_point(vector["turns"], vector["keepRecent"]) == vector["cut"]
    models = [parse_turn(t) for t in vector["turns"]]
    assert find_cut_point(models, vector["keepRecent"]) == vector["cut"]


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_legacy_paths_estimate_and_cut_as_the_original(path: Path) -> None:
    expected = expected_for(path)
    graph = read_legacy_session(path)
    path_turns = graph.path_to(expected["leaf"])
    assert estimate_context_tokens(path_turns) == expected["pathTokenEstimate"]
    cuts = [find_cut_point(path_turns, keep) for keep in range(len(expected["cutPoints"]))]
    assert cuts == expected["cutPoints"]


def test_estimate_counts_utf16_units_and_serialized_json() -> None:
    turn = {
        "role": "assistant",
        "blocks": [
            {"kind": "text", "text": "😀"},  # 2 units
            {"kind": "tool_call", "id": "x", "name": "ab", "input": {"k": 1.0}},  # 2 + 7
            {"kind": "tool_result", "callId": "x", "output": 'a"b'},  # "a\"b" = 6
            {"kind": "citation", "text": "not counted"},
        ],
    }
    assert estimate_context_tokens([turn]) == -(-(2 + 9 + 6) // 4) + 4


def test_should_compact_at_the_trigger_ratio() -> None:
    turns = [user("x" * 396)]  # 99 + 4 = 103 tokens
    assert estimate_context_tokens(turns) == 103
    assert should_compact(turns, ModelCard(id="m", context_window=128))  # 103 >= 102.4
    assert not should_compact(turns, ModelCard(id="m", context_window=129))  # 103 < 103.2
    half = CompactionPolicy(trigger_ratio=0.5)
    assert should_compact(turns, ModelCard(id="m", context_window=206), half)
    assert not should_compact(turns, ModelCard(id="m", context_window=207), half)


@pytest.mark.parametrize("window", [0, -1])
def test_a_misconfigured_card_never_triggers(window: int) -> None:
    assert not should_compact([user("x" * 1000)], ModelCard(id="m", context_window=window))


def test_cut_point_never_starts_on_a_tool_result() -> None:
    turns = [user("a"), *tool_exchange(1), *tool_exchange(2)]
    assert find_cut_point(turns, 1) == 5  # index 4 is a result: moved past the end
    assert find_cut_point(turns, 2) == 3
    assert find_cut_point(turns, 3) == 3  # index 2 is a result of the call at 1


class ScriptedModel:
    """An invoker that replays a fixed list of events and records what it was asked."""

    def __init__(self, events: Sequence[StreamEvent | dict[str, Any]], *, sync: bool = False):
        self.events = events
        self.sync = sync
        self.calls: list[tuple[Conversation, StreamOptions]] = []

    def __call__(self, conversation: Conversation, options: StreamOptions) -> Any:
        self.calls.append((conversation, options))
        return iter(self.events) if self.sync else self._stream()

    async def _stream(self) -> AsyncIterator[StreamEvent | dict[str, Any]]:
        for event in self.events:
            yield event


def done(text: str) -> StreamDone:
    return StreamDone(turn=Turn(role="assistant", blocks=(TextBlock(text=text),)))


@pytest.mark.parametrize("sync", [False, True])
def test_summarize_prefers_done_and_files_the_summary_under_user(sync: bool) -> None:
    model = ScriptedModel([StreamTextDelta(delta="partial"), done("the summary")], sync=sync)
    turn = asyncio.run(summarize([user("hello"), *tool_exchange(1)], model))
    assert turn.role == "user"
    assert turn.to_json()["blocks"] == [{"kind": "text", "text": f"{SUMMARY_HEADING}\nthe summary"}]
    ((conversation, _),) = model.calls
    assert conversation.system == DISTILL_PREAMBLE
    (prompt,) = conversation.turns
    assert prompt.role == "user"
    transcript = prompt.to_json()["blocks"][0]["text"]
    assert "hello" in transcript
    assert "ls" in transcript
    assert "ok" in transcript


def test_summarize_falls_back_to_deltas_without_done() -> None:
    model = ScriptedModel(
        [
            {"kind": "text_delta", "delta": "part one, "},
            {"kind": "thinking_delta", "delta": "?"},
            {"kind": "text_delta", "delta": "part two"},
        ]
    )
    turn = asyncio.run(summarize([user("x")], model))
    assert turn.to_json()["blocks"][0]["text"] == f"{SUMMARY_HEADING}\npart one, part two"


def failing_stream() -> Iterator[StreamEvent]:
    yield StreamTextDelta(delta="half")
    raise ConnectionError("socket closed")


@pytest.mark.parametrize(
    ("invoker", "message"),
    [
        (ScriptedModel([{"kind": "error", "message": "rate limited"}]), "rate limited"),
        (ScriptedModel([StreamTextDelta(delta="  ")]), "empty summary"),
        (ScriptedModel([done("")]), "empty summary"),
        (ScriptedModel([{"kind": "bogus"}]), "invalid stream event"),
        (lambda conversation, options: failing_stream(), "socket closed"),
        (lambda conversation, options: 1 / 0, "division by zero"),
    ],
    ids=["error-event", "blank-deltas", "empty-done", "bad-event", "stream-raises", "call-raises"],
)
def test_summarize_raises_a_clear_error(invoker: Any, message: str) -> None:
    with pytest.raises(CondensationError, match=message):
        asyncio.run(summarize([user("x")], invoker))


def test_compact_keeps_the_tail_and_prepends_the_summary() -> None:
    turns: list[TurnLike] = [user(f"q{i}") for i in range(5)]
    turns += tool_exchange(9)
    model = ScriptedModel([done("S")])
    card = ModelCard(id="m", context_window=10)
    result = asyncio.run(compact(turns, card, CompactionPolicy(keep_recent=1), model))
    # keep_recent=1 would start on the tool result, so the whole tail moves past the end.
    assert len(result) == 1
    result = asyncio.run(compact(turns, card, CompactionPolicy(keep_recent=2), model))
    assert result[1:] == turns[5:]
    first = result[0]
    assert isinstance(first, Turn)
    assert first.to_json()["blocks"][0]["text"].startswith(SUMMARY_HEADING)


def test_compact_with_nothing_to_condense_returns_the_input_without_calling_the_model() -> None:
    turns: list[TurnLike] = [user("a"), user("b")]
    model = ScriptedModel([done("never")])
    result = asyncio.run(compact(turns, ModelCard(id="m", context_window=1), None, model))
    assert result is turns
    assert model.calls == []


def test_compact_propagates_errors_and_leaves_the_history_alone() -> None:
    turns: list[TurnLike] = [user(str(i)) for i in range(20)]
    before = list(turns)
    with pytest.raises(CondensationError):
        asyncio.run(
            compact(
                turns,
                ModelCard(id="m", context_window=1),
                None,
                ScriptedModel([{"kind": "error", "message": "down"}]),
            )
        )
    assert turns == before
