"""Compacting stored sessions onto a new branch, on SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memstore import (
    SUMMARY_HEADING,
    CompactionPolicy,
    CondensationError,
    Conversation,
    ModelCard,
    SessionGraph,
    StreamOptions,
    Turn,
    estimate_context_tokens,
)
from memstore.condense import DISTILL_PREAMBLE
from memstore.errors import HeadMovedError, UnknownSessionError
from memstore.invokers import extractive, openai_compatible
from memstore.store import SessionStore
from memstore.store.compaction import CompactionResult

from .invoker_servers import openai_frames, serve, stream

CARD = ModelCard(id="summarizer", context_window=4000, max_output_tokens=500)
KEEP = CompactionPolicy(keep_recent=6)
COMPACTED_AT = 1_800_000_000_000


def compacted_at() -> int:
    return COMPACTED_AT


def history(turns: int, size: int = 800) -> list[dict[str, Any]]:
    """Alternating requests and answers, with a tool exchange now and then."""
    out: list[dict[str, Any]] = []
    for n in range(turns):
        if n % 5 == 3:
            call = {"kind": "tool_call", "id": f"c{n}", "name": "grep", "input": {"n": n}}
            out.append({"role": "assistant", "blocks": [call]})
            result = {"kind": "tool_result", "callId": f"c{n}", "output": f"match {n}"}
            out.append({"role": "user", "blocks": [result]})
        role = "user" if n % 2 == 0 else "assistant"
        text = f"turn {n}: " + "words " * (size // 6)
        out.append({"role": role, "blocks": [{"kind": "text", "text": text}]})
    return out


def seed(store: SessionStore, session_id: str, turns: list[dict[str, Any]]) -> list[str]:
    """Append `turns` to the session one by one; their node ids."""
    clock = itertools.count(1_767_225_600_000, 1000)
    graph = SessionGraph(session_id, clock=lambda: next(clock))
    ids = []
    for turn in turns:
        node = graph.next_node(turn)
        store.append_node(session_id, node)
        ids.append(graph.add(node).id)
    return ids


def as_json(turns: list[Turn]) -> list[dict[str, Any]]:
    return [turn.to_json() for turn in turns]


def node_count(store: SessionStore, session_id: str) -> int:
    return store.session_info(session_id).node_count


def test_compacting_puts_a_summary_and_the_tail_on_a_new_branch(store: SessionStore) -> None:
    ids = seed(store, "s", history(40))
    old_head = ids[-1]
    old_nodes = store.load_path_nodes("s")
    old_path = [node.turn for node in old_nodes]
    assert estimate_context_tokens(old_path) > 2 * CARD.context_window  # several chunks
    count = node_count(store, "s")

    result = store.compact_session("s", CARD, extractive(), KEEP, clock=compacted_at)

    new_nodes = store.load_path_nodes("s")
    new_path = [node.turn for node in new_nodes]
    cut = len(old_path) - 6
    assert result == CompactionResult(
        session_id="s",
        previous_head=old_head,
        new_head=new_nodes[-1].id,
        summary_node_id=new_nodes[0].id,
        condensed_turns=cut,
        kept_turns=6,
        tokens_before=estimate_context_tokens(old_path),
        tokens_after=estimate_context_tokens(new_path),
        changed=True,
    )
    assert result.tokens_after < result.tokens_before
    assert store.head("s") == result.new_head
    summary = new_nodes[0]
    assert summary.parent is None
    assert summary.turn.role == "user"
    wire = summary.turn.to_json()
    assert wire["blocks"][0]["text"].startswith(f"{SUMMARY_HEADING}\n")
    assert wire["memstore"] == {
        "condensed": {
            "cutNodeId": ids[cut],
            "fromNodeId": old_head,
            "condensedTurns": cut,
            "tokensBefore": result.tokens_before,
            "tokensAfter": result.tokens_after,
        }
    }
    assert as_json(new_path[1:]) == as_json(old_path[cut:])
    # The summary is new; the turns kept keep their own times (issue 18 item 11).
    kept_times = [node.created_at for node in old_nodes[cut:]]
    assert [node.created_at for node in new_nodes] == [COMPACTED_AT, *kept_times]
    assert kept_times[0] < COMPACTED_AT
    assert as_json(store.load_path("s", old_head)) == as_json(old_path)
    assert node_count(store, "s") == count + 1 + 6


def test_a_compacted_session_can_be_compacted_again(store: SessionStore) -> None:
    seed(store, "s", history(40))
    first = store.compact_session("s", CARD, extractive(), KEEP)
    seed_more = store.session("s")
    for turn in history(12):
        seed_more.append(turn)
    second = store.compact_session("s", CARD, extractive(), KEEP)
    assert second.changed
    assert second.previous_head != first.new_head
    (root, *_) = store.load_path_nodes("s")
    assert root.id == second.summary_node_id
    condensed = root.turn.to_json()["memstore"]["condensed"]
    assert condensed["fromNodeId"] == second.previous_head


def test_a_session_too_short_to_condense_is_left_alone(store: SessionStore) -> None:
    ids = seed(store, "s", history(3))
    path = store.load_path("s")
    calls: list[Conversation] = []

    def model(conversation: Conversation, options: StreamOptions) -> Any:
        calls.append(conversation)
        return extractive()(conversation, options)

    result = store.compact_session("s", CARD, model, CompactionPolicy(keep_recent=20))
    assert not result.changed
    assert result.previous_head == result.new_head == ids[-1]
    assert result.summary_node_id is None
    assert (result.condensed_turns, result.kept_turns) == (0, len(path))
    assert result.tokens_before == result.tokens_after == estimate_context_tokens(path)
    assert calls == []
    assert node_count(store, "s") == len(ids)
    assert store.head("s") == ids[-1]


def test_an_empty_session_is_left_alone(store: SessionStore) -> None:
    store.update_session("empty", title="nothing yet")
    result = store.compact_session("empty", CARD, extractive())
    assert not result.changed
    assert result.previous_head is None
    assert result.new_head is None
    assert store.head("empty") is None


def test_an_unknown_session_is_an_error(store: SessionStore) -> None:
    with pytest.raises(UnknownSessionError, match="nope"):
        store.compact_session("nope", CARD, extractive())


def test_a_failed_summary_appends_nothing(store: SessionStore) -> None:
    ids = seed(store, "s", history(20))

    def model(conversation: Conversation, options: StreamOptions) -> Any:
        return iter([{"kind": "error", "message": "overloaded"}])

    with pytest.raises(CondensationError, match="overloaded"):
        store.compact_session("s", CARD, model, KEEP)
    assert store.head("s") == ids[-1]
    assert node_count(store, "s") == len(ids)


def test_a_concurrent_append_makes_compaction_fail_and_append_nothing(
    store: SessionStore, database_url: str
) -> None:
    ids = seed(store, "s", history(20))
    interloper = {"role": "user", "blocks": [{"kind": "text", "text": "one more thing"}]}
    appended: list[str] = []

    def racing(conversation: Conversation, options: StreamOptions) -> Any:
        if not appended:  # another writer gets in while the model is thinking
            with SessionStore(database_url) as other:
                appended.append(other.session("s").append(interloper).id)
        return extractive()(conversation, options)

    with pytest.raises(HeadMovedError):
        store.compact_session("s", CARD, racing, KEEP)
    assert store.head("s") == appended[0]
    assert node_count(store, "s") == len(ids) + 1
    assert store.load_path("s")[-1].to_json() == interloper


# --- end to end: an OpenAI-compatible server does the summarizing --------------------------------


def test_compacting_through_an_openai_compatible_server(store: SessionStore) -> None:
    ids = seed(store, "s", history(40))
    old_path = store.load_path("s")
    reply = ["The user asked about ", "forty turns; grep ran eight times."]
    with serve(stream(openai_frames(reply))) as server:
        invoker = openai_compatible(f"{server.url}/v1", "local-model", timeout=5.0)
        result = store.compact_session("s", CARD, invoker, KEEP)
        requests = server.received
    assert result.changed
    assert len(requests) > 1  # chunks, then the merge
    for request in requests:
        assert request.body["model"] == CARD.id
        assert request.body["max_tokens"] == 500
    assert requests[0].body["messages"][0] == {"role": "system", "content": DISTILL_PREAMBLE}
    new_path = store.load_path("s")
    assert new_path[0].to_json()["blocks"] == [
        {"kind": "text", "text": f"{SUMMARY_HEADING}\n{''.join(reply)}"}
    ]
    assert as_json(new_path[1:]) == as_json(old_path[-6:])
    assert as_json(store.load_path("s", ids[-1])) == as_json(old_path)
    assert store.head("s") == result.new_head


def test_a_window_too_small_for_the_request_is_refused_before_the_model_is_called(
    store: SessionStore,
) -> None:
    from memstore.errors import InvalidArgumentError

    store.append_many("s", history(3))
    head = store.head("s")
    card = ModelCard(id="tiny", context_window=10)
    with pytest.raises(InvalidArgumentError, match=r"a context window of 10 tokens.*at least"):
        store.compact_session("s", card, extractive())
    assert store.head("s") == head


def test_compacting_again_with_nothing_new_writes_nothing(store: SessionStore) -> None:
    """The second `memstore compact` (a cron, a retry) condensed the summary alone into a new
    summary: a model call, a copy of the branch, and a longer history each time."""
    seed(store, "s", history(3000, size=60))
    calls: list[Conversation] = []

    def model(conversation: Conversation, options: StreamOptions) -> Any:
        calls.append(conversation)
        return extractive()(conversation, options)

    first = store.compact_session("s", CARD, model, KEEP)
    assert first.changed
    nodes, made = node_count(store, "s"), len(calls)
    again = store.compact_session("s", CARD, model, KEEP)
    assert not again.changed
    assert again.new_head == again.previous_head == first.new_head
    assert (len(calls), node_count(store, "s")) == (made, nodes)
    store.session("s").append(history(1)[0])  # a new turn: the oldest kept one goes
    assert store.compact_session("s", CARD, model, KEEP).condensed_turns == 2
