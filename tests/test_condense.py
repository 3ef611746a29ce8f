from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memstore import (
    SUMMARY_HEADING,
    CompactionPolicy,
    CondensationError,
    Conversation,
    InvalidArgumentError,
    ModelCard,
    NodeUsage,
    StreamDone,
    StreamError,
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
    render_transcript,
    should_compact,
    summarize,
)
from memstore.condense import DISTILL_PREAMBLE, MERGE_PREAMBLE, minimum_budget, request_budget

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


def test_should_compact_can_use_the_usage_a_provider_reported() -> None:
    turns = [user("x" * 396), user("y" * 12)]  # the rule: 103 + 7 = 110 tokens
    reported = [NodeUsage(input_tokens=900, cache_read_tokens=80, output_tokens=20), None]
    card = ModelCard(id="m", context_window=1000)
    assert not should_compact(turns, card)  # the default: the character rule alone
    assert should_compact(turns, card, usages=reported)  # 1000 reported + 7 >= 800
    assert not should_compact(turns, card, usages=[None, None])  # nothing reported: the rule
    small = ModelCard(id="m", context_window=128)  # the rule's 110 >= 102.4; reported 15 + 7
    assert should_compact(turns, small)
    assert not should_compact(
        turns, small, usages=[NodeUsage(input_tokens=10, output_tokens=5), None]
    )
    with pytest.raises(InvalidArgumentError, match="one usage per turn"):
        should_compact(turns, card, usages=reported[:1])


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


# --- bounded input: chunks that fit the summarizing model's window -----------------------------

CARD = ModelCard(id="summarizer", context_window=2000, max_output_tokens=200)
BUDGET = CARD.context_window - 200


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def request_tokens(conversation: Conversation) -> int:
    """A request's size as the brief defines it: its turns plus the system preamble."""
    return estimate_context_tokens(conversation.turns) + -(-utf16(conversation.system or "") // 4)


class Recorder:
    """Answers request n with `reply(n)` (or fails at `fail_at`) and records every request."""

    def __init__(self, reply: Any = "summary {n}", fail_at: int | None = None) -> None:
        self.reply = reply
        self.fail_at = fail_at
        self.calls: list[tuple[Conversation, StreamOptions]] = []

    def __call__(self, conversation: Conversation, options: StreamOptions) -> Any:
        self.calls.append((conversation, options))
        return self._stream(len(self.calls) - 1)

    async def _stream(self, n: int) -> AsyncIterator[StreamEvent]:
        if n == self.fail_at:
            yield StreamError(message=f"call {n} failed")
            return
        yield done(self.reply.format(n=n) if isinstance(self.reply, str) else self.reply(n))

    def transcripts(self, system: str | None = None) -> list[str]:
        return [
            conversation.turns[0].to_json()["blocks"][0]["text"]
            for conversation, _ in self.calls
            if system is None or conversation.system == system
        ]

    def assert_every_request_fits(self, card: ModelCard = CARD) -> None:
        assert self.calls
        for conversation, options in self.calls:
            assert options.model == card.id
            assert options.max_output_tokens is not None
            assert request_tokens(conversation) <= card.context_window - options.max_output_tokens


def said(n: int, size: int) -> dict[str, Any]:
    role = "user" if n % 2 == 0 else "assistant"
    text = f"turn-{n} " + "lorem ipsum " * (size // 12)
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def long_history(turns: int = 64, size: int = 1400) -> list[TurnLike]:
    return [said(n, size) for n in range(turns)]


def run_compact(turns: Sequence[TurnLike], model: Any, card: ModelCard = CARD) -> Sequence[Any]:
    return asyncio.run(compact(turns, card, CompactionPolicy(keep_recent=4), model))


def test_a_prefix_ten_windows_long_is_condensed_in_chunks_then_merged() -> None:
    turns = long_history()
    prefix = turns[:-4]
    assert estimate_context_tokens(prefix) > 10 * CARD.context_window
    model = Recorder()
    result = run_compact(turns, model)
    model.assert_every_request_fits()
    chunks = model.transcripts(DISTILL_PREAMBLE)
    merges = model.transcripts(MERGE_PREAMBLE)
    assert len(chunks) >= 10
    assert len(merges) == 1
    assert model.calls[-1][0].system == MERGE_PREAMBLE
    # Whole turns, in order, each in exactly one chunk: the chunks are the transcript, cut.
    assert "\n\n".join(chunks) == render_transcript(prefix)
    assert all(chunk.startswith(("[user]\n", "[assistant]\n")) for chunk in chunks)
    for n in range(len(chunks)):
        assert f"summary {n}" in merges[0]
    last = len(model.calls) - 1
    assert result[0].to_json()["blocks"][0]["text"] == f"{SUMMARY_HEADING}\nsummary {last}"
    assert result[1:] == turns[-4:]


@pytest.mark.parametrize("reply_chars", [2500, 20_000], ids=["long", "larger-than-window"])
def test_summaries_too_long_to_merge_at_once_are_merged_in_rounds(reply_chars: int) -> None:
    model = Recorder(lambda n: f"summary {n} " + "x" * reply_chars)
    result = run_compact(long_history(), model)
    model.assert_every_request_fits()
    merges = model.transcripts(MERGE_PREAMBLE)
    assert len(merges) >= 3  # more than one round
    assert all(merge.count(SUMMARY_HEADING) >= 2 for merge in merges)  # a lone one waits
    assert model.calls[-1][0].system == MERGE_PREAMBLE
    assert result[0].to_json()["blocks"][0]["text"].startswith(SUMMARY_HEADING)
    if reply_chars > CARD.context_window * 4:
        assert all("characters omitted" in merge for merge in merges)


@pytest.mark.parametrize("filler", ["x", "😀"], ids=["ascii", "astral"])
def test_a_turn_too_large_alone_is_cut_with_a_marker(filler: str) -> None:
    big = user("START " + filler * 50_000 + " END")
    turns: list[TurnLike] = [user("before"), big, user("after"), *long_history(4, 40)]
    model = Recorder()
    run_compact(turns, model)
    model.assert_every_request_fits()
    cut = [chunk for chunk in model.transcripts(DISTILL_PREAMBLE) if "characters omitted" in chunk]
    assert len(cut) == 1
    (chunk,) = cut
    assert chunk.startswith("[user]\nSTART ")
    assert chunk.endswith(" END")
    head, marker, tail = re.split(r"(\n\[\.\.\. \d+ characters omitted \.\.\.\]\n)", chunk)
    omitted = int(re.findall(r"\d+", marker)[0])
    assert utf16(head) + omitted + utf16(tail) == utf16(render_transcript([big]))
    assert "[user]\nbefore" in model.transcripts()[0]


def big_exchange(n: int) -> list[dict[str, Any]]:
    call = {"kind": "tool_call", "id": f"c{n}", "name": "ls", "input": {"path": f"/d{n}"}}
    result = {"kind": "tool_result", "callId": f"c{n}", "output": "entry " * 150}
    return [{"role": "assistant", "blocks": [call]}, {"role": "user", "blocks": [result]}]


def test_a_tool_call_and_its_result_are_never_split_across_chunks() -> None:
    turns: list[TurnLike] = [user("list every directory")]
    for n in range(40):
        turns += big_exchange(n)
    turns += long_history(4, 40)
    model = Recorder()
    run_compact(turns, model)
    model.assert_every_request_fits()
    chunks = model.transcripts(DISTILL_PREAMBLE)
    assert len(chunks) > 3
    assert "\n\n".join(chunks) == render_transcript(turns[:-4])
    for chunk in chunks:
        results = re.findall(r"<- tool result \[(c\d+)\]", chunk)
        calls = re.findall(r"-> tool call ls \[(c\d+)\]", chunk)
        assert results == calls


def test_a_failure_in_any_chunk_raises_and_leaves_the_history_alone() -> None:
    turns = long_history()
    before = copy.deepcopy(turns)
    clean = Recorder()
    run_compact(turns, clean)
    total = len(clean.calls)
    for fail_at in (0, total // 2, total - 1):
        model = Recorder(fail_at=fail_at)
        with pytest.raises(CondensationError, match=f"call {fail_at} failed"):
            run_compact(turns, model)
        assert len(model.calls) == fail_at + 1
        assert turns == before


def test_a_budget_that_fits_everything_makes_the_one_call_summarize_makes() -> None:
    turns = long_history(6, 100)
    bounded, unbounded = Recorder(), Recorder()
    asyncio.run(summarize(turns, bounded, budget_tokens=BUDGET))
    asyncio.run(summarize(turns, unbounded))
    assert bounded.calls == unbounded.calls
    assert len(bounded.calls) == 1


def test_a_budget_too_small_for_the_preamble_is_refused() -> None:
    model = Recorder()
    with pytest.raises(CondensationError, match="cannot hold the summarizing prompt"):
        asyncio.run(summarize([user("x")], model, budget_tokens=minimum_budget() - 1))
    assert model.calls == []


@pytest.mark.parametrize(
    ("card", "reply"),
    [
        (ModelCard(id="a", context_window=100_000, max_output_tokens=4096), 4096),
        (ModelCard(id="b", context_window=100_000), 25_000),
        (ModelCard(id="c", context_window=100_000, max_output_tokens=300_000), 50_000),
    ],
    ids=["card-limit", "quarter-window", "at-most-half"],
)
def test_compact_passes_the_model_and_its_reply_room(card: ModelCard, reply: int) -> None:
    model = Recorder()
    run_compact(long_history(10, 40), model, card)
    ((_, options),) = model.calls
    assert options == StreamOptions(model=card.id, max_output_tokens=reply)
    assert request_budget(card) == card.context_window - reply


def test_a_window_too_small_for_the_preamble_is_one_unbounded_call() -> None:
    card = ModelCard(id="tiny", context_window=100, max_output_tokens=10)
    assert request_budget(card) is None
    model = Recorder()
    run_compact(long_history(10, 40), model, card)
    ((_, options),) = model.calls
    assert options == StreamOptions(model="tiny", max_output_tokens=10)
