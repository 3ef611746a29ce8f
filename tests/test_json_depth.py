"""Turns nested deeper than MAX_JSON_DEPTH are refused at every door, on both backends (SQLite's
JSON functions cannot read them); the deepest allowed turn is stored, searched and deleted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from memstore import SessionStore, jsjson
from memstore.blocks import MAX_JSON_DEPTH
from memstore.errors import InvalidTurnError, JsonlError
from memstore.hashing import hash_node_text
from memstore.jsonl import head_line, node_line
from memstore.types import ToolCallBlock, Turn

from .foreign_lines import claude_code_lines, pi_lines, write_lines

START_MS = 1_767_225_600_000
TOO_DEEP = "more than 1000 levels deep"


def nested(levels: int) -> Any:
    """A value of `levels` nested arrays around a word (0: the word itself)."""
    value: Any = "core"
    for _ in range(levels):
        value = [value]
    return value


def tool_call(input_levels: int) -> dict[str, Any]:
    """A turn whose tool call's input nests `input_levels` arrays: the turn, its blocks and the
    block add three levels."""
    block = {"kind": "tool_call", "id": "c1", "name": "nest", "input": nested(input_levels)}
    return {"role": "assistant", "blocks": [block]}


DEEPEST = tool_call(MAX_JSON_DEPTH - 3)
ONE_TOO_DEEP = tool_call(MAX_JSON_DEPTH - 2)


def test_the_limit_counts_the_turn_itself() -> None:
    assert MAX_JSON_DEPTH == 1000
    Turn.model_validate(DEEPEST)
    with pytest.raises(ValueError, match=r"turn\.blocks\[0\]\.input nests"):
        Turn.model_validate(ONE_TOO_DEEP)


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH - 2, 100_000])
def test_append_and_append_many_refuse_a_turn_too_deep_and_write_nothing(
    store: SessionStore, levels: int
) -> None:
    store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": "before"}]})
    with pytest.raises(InvalidTurnError, match=rf"turn\.blocks\[0\]\.input nests.*{TOO_DEEP}"):
        store.append("s", tool_call(levels))
    fine = {"role": "user", "blocks": [{"kind": "text", "text": "fine"}]}
    with pytest.raises(InvalidTurnError, match=TOO_DEEP):
        store.append_many("s", [fine, tool_call(levels)])
    assert [turn.blocks[0].text for turn in store.load_path("s")] == ["before"]  # type: ignore[union-attr]


def test_a_turn_built_in_python_is_refused_too(store: SessionStore) -> None:
    with pytest.raises(ValueError, match=TOO_DEEP):
        Turn(
            role="assistant",
            blocks=(ToolCallBlock(id="c", name="n", input=nested(MAX_JSON_DEPTH)),),
        )


def test_an_unknown_key_too_deep_is_named(store: SessionStore) -> None:
    turn = {"role": "user", "blocks": [], "meta": nested(MAX_JSON_DEPTH)}
    with pytest.raises(InvalidTurnError, match=rf"turn\.meta nests.*{TOO_DEEP}"):
        store.append("s", turn)


def test_the_deepest_turn_allowed_is_searched_and_deleted_while_in_the_backlog(
    store: SessionStore,
) -> None:
    store.append("deep", {"role": "user", "blocks": [{"kind": "text", "text": "zebras"}]})
    store.append("deep", DEEPEST)
    store.append("other", {"role": "user", "blocks": [{"kind": "text", "text": "zebras too"}]})
    assert {hit.session_id for hit in store.search("zebras")} == {"deep", "other"}
    assert [hit.session_id for hit in store.search("nest")] == ["deep"]
    assert store.delete_session("deep") is True
    assert store.list_sessions() == ["other"]
    assert [hit.session_id for hit in store.search("zebras")] == ["other"]


def test_the_deepest_turn_allowed_is_queried_by_sql(database_url: str) -> None:
    with SessionStore(database_url) as store:
        store.append("deep", DEEPEST)
        result = store.read_only_query("SELECT kind, tool_name FROM blocks")
    assert [tuple(row) for row in result.rows] == [("tool_call", "nest")]


def legacy_file(path: Path, levels: int) -> Path:
    """A legacy JSONL file: one node whose tool call's input nests `levels` arrays."""
    turn_json = jsjson.dumps(tool_call(levels))
    node_id = hash_node_text(None, turn_json.encode(), START_MS)
    path.write_text(node_line(node_id, None, turn_json, START_MS) + head_line(node_id))
    return path


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH - 2, 100_000])
def test_the_legacy_importer_refuses_it_by_file_and_line(
    store: SessionStore, tmp_path: Path, levels: int
) -> None:
    source = legacy_file(tmp_path / "deep.jsonl", levels)
    with pytest.raises(JsonlError, match=rf"deep\.jsonl:1: .*input nests.*{TOO_DEEP}"):
        store.import_jsonl(source)
    assert store.list_sessions() == []


def deep_pi_file(path: Path) -> Path:
    lines = pi_lines("deep", 1)
    entry = jsjson.loads(lines[2])
    entry["message"]["content"][0]["arguments"] = {"x": nested(MAX_JSON_DEPTH)}
    lines[2] = jsjson.dumps(entry).encode() + b"\n"
    return write_lines(path, lines)


def deep_claude_code_file(path: Path) -> Path:
    lines = claude_code_lines("deep", 1)
    entry = jsjson.loads(lines[1])
    block = {"type": "tool_use", "id": "t1", "name": "nest", "input": nested(MAX_JSON_DEPTH)}
    entry["message"]["content"] = [block]
    lines[1] = jsjson.dumps(entry).encode() + b"\n"
    return write_lines(path, lines)


@pytest.mark.parametrize(
    ("agent", "write"), [("pi", deep_pi_file), ("claude-code", deep_claude_code_file)]
)
def test_the_agents_importers_refuse_it_by_file_and_line(
    store: SessionStore, tmp_path: Path, agent: str, write: Any
) -> None:
    source = write(tmp_path / "deep.jsonl")
    report = store.import_files([source], source=agent)
    (failure,) = report.failures
    assert f"deep.jsonl:{2 if agent == 'claude-code' else 3}: " in str(failure)
    assert TOO_DEEP in str(failure)
    assert store.list_sessions() == []


def test_the_langchain_adapter_refuses_it(database_url: str) -> None:
    from memstore.integrations.langchain import MemstoreChatMessageHistory

    with SessionStore(database_url) as store:
        history = MemstoreChatMessageHistory("chat", store)
        message = AIMessage("hi", additional_kwargs={"deep": nested(MAX_JSON_DEPTH)})
        with pytest.raises(InvalidTurnError, match=TOO_DEEP):
            history.add_messages([message])
        assert store.load_path("chat") == []


def test_the_openai_agents_adapter_refuses_it(database_url: str) -> None:
    from memstore.integrations.openai_agents import MemstoreSession

    item: Any = {"type": "mcp_list_tools", "id": "x", "tools": nested(MAX_JSON_DEPTH)}

    async def add() -> None:
        with SessionStore(database_url) as store:
            session = MemstoreSession("agent", store)
            with pytest.raises(InvalidTurnError, match=TOO_DEEP):
                await session.add_items([item])
            assert store.load_path("agent") == []

    asyncio.run(add())
