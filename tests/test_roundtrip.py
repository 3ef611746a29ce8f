"""The invariant of issue 15: whatever memstore stores, it exports and re-imports byte for byte."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import InvalidTurnError, JsonlError, SessionGraph, SessionStore, jsjson
from memstore.hashing import hash_node_text
from memstore.types import parse_turn

from .strategies import damaged_turns, wire_turns

_SETTINGS = settings(
    max_examples=15,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _copy_store(request: pytest.FixtureRequest, backend: str) -> SessionStore:
    copy = SessionStore(request.getfixturevalue(f"{backend}_url"))
    request.addfinalizer(copy.close)
    return copy


def _export_import_export(
    source: SessionStore, copy: SessionStore, session_id: str, folder: Path
) -> bytes:
    """The session's export, checked to come back unchanged from `copy` (an empty session)."""
    first, second = folder / f"{session_id}.jsonl", folder / f"{session_id}.again.jsonl"
    source.export_jsonl(session_id, first)
    copy.import_jsonl(first)
    copy.export_jsonl(session_id, second)
    assert second.read_bytes() == first.read_bytes()
    return first.read_bytes()


@pytest.mark.parametrize("copy_backend", ["sqlite", "postgres"])
def test_every_turn_that_append_accepts_round_trips_byte_for_byte(
    open_store: Callable[..., SessionStore],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    copy_backend: str,
) -> None:
    """Sync and async stores on both backends (`open_store`), through `append_node`, a session
    handle, `append` and `append_many` (a batch refused for one bad turn stores none of them);
    each export is imported into the other backend too."""
    source, copy = open_store(), _copy_store(request, copy_backend)
    sessions = itertools.count()

    @_SETTINGS
    @given(
        turns=st.lists(damaged_turns() | wire_turns, min_size=1, max_size=4),
        via=st.sampled_from(["append_node", "handle", "append", "append_many"]),
    )
    def round_trip(turns: list[Any], via: str) -> None:
        session_id = f"s{next(sessions)}"
        if via == "append_many":
            stored = _append_as_batches(source, session_id, turns)
        else:
            stored = _append_one_by_one(source, session_id, turns, via)
        if not stored:
            return
        written = _export_import_export(source, copy, session_id, tmp_path)
        lines = [json.loads(line) for line in written.decode().split("\n") if line]
        kept = [jsjson.dumps(line["node"]["turn"]) for line in lines if line["type"] == "node"]
        assert kept == stored
        assert [n.turn.json_text() for n in copy.load_path_nodes(session_id)] == stored

    round_trip()


def _append_one_by_one(
    store: SessionStore, session_id: str, turns: list[Any], via: str
) -> list[str]:
    """Append each turn the store accepts, through `via`; the accepted turns' JSON texts."""
    ticks = itertools.count(1_767_225_600_000)
    graph = SessionGraph(session_id, clock=lambda: next(ticks))
    handle = store.session(session_id) if via == "handle" else None
    stored = []
    for turn in turns:
        try:
            if via == "append_node":
                node = graph.append(turn)
                store.append_node(session_id, node)
            else:
                node = handle.append(turn) if handle is not None else store.append(session_id, turn)
        except InvalidTurnError:
            continue
        stored.append(node.turn.json_text())
    return stored


def _append_as_batches(store: SessionStore, session_id: str, turns: list[Any]) -> list[str]:
    """All the turns as one batch; when one is refused, nothing is stored and the accepted
    turns go in as a second batch. The accepted turns' JSON texts."""
    accepted = []
    for turn in turns:
        try:
            accepted.append(parse_turn(turn))
        except InvalidTurnError:
            continue
    if len(accepted) < len(turns):
        with pytest.raises(InvalidTurnError):
            store.append_many(session_id, turns)
        assert store.head(session_id) is None
    nodes = store.append_many(session_id, accepted)
    return [node.turn.json_text() for node in nodes]


def _line(record: dict[str, Any], spaced: bool, reordered: bool) -> str:
    """A record as a writer other than `JSON.stringify` might write it: spaced, keys reordered."""
    if reordered:
        record = dict(reversed(record.items()))
    text = jsjson.dumps(record)
    if spaced:  # plain `json` writes the same values with spaces (and its own escapes)
        text = json.dumps(json.loads(text), ensure_ascii=False, separators=(", ", ": "))
    return text + "\n"


@pytest.mark.parametrize("copy_backend", ["sqlite", "postgres"])
def test_every_file_that_import_accepts_round_trips_byte_for_byte(
    open_store: Callable[..., SessionStore],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    copy_backend: str,
) -> None:
    """Files with valid and invalid turns, lines not as the original writer writes them, and
    records of other types: those the import accepts are exported exactly as they were."""
    source, copy = open_store(), _copy_store(request, copy_backend)
    sessions = itertools.count()

    @_SETTINGS
    @given(
        turns=st.lists(damaged_turns() | wire_turns, min_size=1, max_size=4),
        styles=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=4),
    )
    def round_trip(turns: list[Any], styles: list[tuple[bool, bool, bool]]) -> None:
        session_id = f"f{next(sessions)}"
        lines, parent = [], None
        for (spaced, reordered, other), (created_at, turn) in zip(
            styles, enumerate(turns), strict=False
        ):
            turn_json = jsjson.dumps(turn)
            node_id = hash_node_text(parent, turn_json.encode(), created_at)
            node = {"id": node_id, "parent": parent, "turn": turn, "createdAt": created_at}
            lines.append(_line({"type": "node", "node": node}, spaced, reordered))
            lines.append(_line({"type": "head", "leaf": node_id}, spaced, False))
            if other:
                lines.append(_line({"type": "note", "text": "kept"}, spaced, reordered))
            parent = node_id
        path = tmp_path / f"{session_id}.jsonl"
        path.write_bytes("".join(lines).encode("utf-8", "surrogatepass"))
        try:
            source.import_jsonl(path)
        except JsonlError:
            return
        assert _export_import_export(source, copy, session_id, tmp_path / "out") == (
            path.read_bytes()
        )

    (tmp_path / "out").mkdir()
    round_trip()
