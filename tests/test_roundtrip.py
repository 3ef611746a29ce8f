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
    """Sync and async stores on both backends (`open_store`), through a session handle and
    through `append_node`; each export is imported into the other backend too."""
    source, copy = open_store(), _copy_store(request, copy_backend)
    sessions = itertools.count()

    @_SETTINGS
    @given(
        turns=st.lists(damaged_turns() | wire_turns, min_size=1, max_size=4),
        via_handle=st.booleans(),
    )
    def round_trip(turns: list[Any], via_handle: bool) -> None:
        session_id = f"s{next(sessions)}"
        ticks = itertools.count(1_767_225_600_000)
        graph = SessionGraph(session_id, clock=lambda: next(ticks))
        handle = source.session(session_id) if via_handle else None
        stored = []
        for turn in turns:
            try:
                node = handle.append(turn) if handle is not None else graph.append(turn)
            except InvalidTurnError:
                continue
            if handle is None:
                source.append_node(session_id, node)
            stored.append(node.turn.json_text())
        if not stored:
            return
        written = _export_import_export(source, copy, session_id, tmp_path)
        lines = [json.loads(line) for line in written.decode().split("\n") if line]
        kept = [jsjson.dumps(line["node"]["turn"]) for line in lines if line["type"] == "node"]
        assert kept == stored
        assert [n.turn.json_text() for n in copy.load_path_nodes(session_id)] == stored

    round_trip()


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
