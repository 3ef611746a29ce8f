"""A stateful property test: the SQL store, the original file store and an in-memory model agree.

Hypothesis drives random sequences of appends (with repeated content and repeated times, so
content addresses collide), branches, forks, deletes, reopenings and export/re-import rounds
against three implementations at once:

- the model: one `SessionGraph` per session, the in-memory DAG the stores persist;
- `SessionStore`, on SQLite and on PostgreSQL (the `database_url` fixture runs the test on each);
- `JsonlSessionStore`, the original file-backed store, for the operations it has (fork and delete
  are mirrored the way its users would do them: appending the path's nodes, removing the file).

After every step all three must hold the same sessions, each with the same nodes in the same
order (compared as `JSON.stringify` text, as ints and floats may come back as the other type),
the same head and the same path to it; every export must be byte-identical to the original
store's file.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from memstore import SessionExistsError, SessionGraph, SessionNode, SessionStore, jsjson
from memstore.errors import UnknownSessionError
from memstore.jsonl import JsonlSessionStore, session_file

from .test_jsonl import turns as generated_turns

pytestmark = pytest.mark.slow  # a long stateful run against both stores

BASE_TIME = 1_767_225_600_000
NAMES = ["a", "b", "o'brien; DROP TABLE nodes; --", "ünï 😀"]


def say(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


# A few fixed turns, drawn often, make equal content (and, with equal times, equal ids) common.
FIXED_TURNS = [say("user", "hi"), say("assistant", "hello"), say("user", "hi")]
TURNS = st.sampled_from(FIXED_TURNS) | generated_turns
TICKS = st.integers(0, 2)
SETTINGS = settings(
    max_examples=20,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def texts(nodes: list[SessionNode]) -> list[str]:
    return [jsjson.dumps(node.to_json()) for node in nodes]


class StoresAgree(RuleBasedStateMachine):
    """One example: a store of its own on the test's database, session ids of its own."""

    url: str  # set by the test, which owns the database
    root: Path

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"m{uuid.uuid4().hex[:12]}-"
        self.store = SessionStore(self.url)
        self.files = JsonlSessionStore(self.root / self.prefix / "files")
        self.scratch = self.root / self.prefix / "exports"
        self.model: dict[str, SessionGraph] = {}
        self.now = BASE_TIME
        self.imports = 0

    def clock(self) -> int:
        return self.now

    def teardown(self) -> None:
        self.store.close()

    # --- helpers ------------------------------------------------------------------------------

    def _append(self, session_id: str, turn: dict[str, Any], tick: int) -> None:
        graph = self.model.setdefault(session_id, SessionGraph(session_id, clock=self.clock))
        stored_head = self.store.head(session_id)
        self.now = BASE_TIME + tick
        node = graph.next_node(turn)
        self.store.append_node(session_id, node, expected_head=stored_head)
        self.files.append_node(session_id, node)
        graph.add(node)

    def _adopt(self, session_id: str, nodes: list[SessionNode], leaf: str | None) -> None:
        self.model[session_id] = SessionGraph.hydrate(session_id, nodes, leaf, clock=self.clock)

    def _any_session(self, data: st.DataObject) -> str:
        """A session id: one of the fixed names (which may not exist) or any existing session
        (forks and imports included)."""
        known = {self.prefix + name for name in NAMES} | set(self.model)
        return data.draw(st.sampled_from(sorted(known)))

    # --- rules --------------------------------------------------------------------------------

    @rule(data=st.data(), turn=TURNS, tick=TICKS)
    def append(self, data: st.DataObject, turn: dict[str, Any], tick: int) -> None:
        self._append(self._any_session(data), turn, tick)

    @rule(data=st.data(), turn=TURNS, tick=TICKS)
    def branch(self, data: st.DataObject, turn: dict[str, Any], tick: int) -> None:
        filled = sorted(sid for sid, graph in self.model.items() if graph.size)
        if not filled:
            return
        session_id = data.draw(st.sampled_from(filled))
        graph = self.model[session_id]
        graph.branch_from(data.draw(st.sampled_from([node.id for node in graph.all()])))
        self._append(session_id, turn, tick)

    @rule(data=st.data(), into=st.sampled_from(NAMES))
    def fork(self, data: st.DataObject, into: str) -> None:
        source_id, new_id = self._any_session(data), f"{self.prefix}{into} (fork)"
        if source_id not in self.model:
            with pytest.raises(UnknownSessionError):
                self.store.fork_session(source_id, None, new_id)
            return
        graph = self.model[source_id]
        leaf = data.draw(st.none() | st.sampled_from([node.id for node in graph.all()]))
        if new_id in self.model:
            with pytest.raises(SessionExistsError):
                self.store.fork_session(source_id, leaf, new_id)
            return
        new_head = self.store.fork_session(source_id, leaf, new_id)
        target = leaf if leaf is not None else graph.leaf
        path = graph.path_nodes(target) if target is not None else []
        assert new_head == (path[-1].id if path else None)
        for node in path:  # what a user of the original store does to copy a branch
            self.files.append_node(new_id, node)
        self._adopt(new_id, path, new_head)

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        session_id = self._any_session(data)
        assert self.store.delete_session(session_id) is (session_id in self.model)
        session_file(self.files.root, session_id).unlink(missing_ok=True)
        self.model.pop(session_id, None)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = SessionStore(self.url)

    @rule(data=st.data())
    def export_and_import_again(self, data: st.DataObject) -> None:
        if not self.model:
            return
        source_id = data.draw(st.sampled_from(sorted(self.model)))
        exported = self.scratch / f"{self.imports}.jsonl"
        self.store.export_jsonl(source_id, exported)
        original = session_file(self.files.root, source_id).read_bytes()
        assert exported.read_bytes() == original
        new_id = f"{self.prefix}imported {self.imports}"
        self.imports += 1
        report = self.store.import_jsonl(exported, session_id=new_id)
        assert report.warnings == []
        session_file(self.files.root, new_id).write_bytes(original)
        source = self.model[source_id]
        self._adopt(new_id, source.all(), source.leaf)
        again = self.scratch / f"{new_id}.jsonl"
        self.store.export_jsonl(new_id, again)
        assert again.read_bytes() == original

    # --- what must always hold ----------------------------------------------------------------

    @invariant()
    def the_stores_hold_what_the_model_holds(self) -> None:
        mine = sorted(sid for sid in self.store.list_sessions() if sid.startswith(self.prefix))
        assert mine == sorted(self.model)
        assert sorted(self.files.list_sessions()) == sorted(self.model)
        for session_id, graph in self.model.items():
            expected = texts(graph.all())
            stored, filed = self.store.load_session(session_id), self.files.load_session(session_id)
            for loaded in (stored, filed):
                assert texts(loaded.all()) == expected
                assert loaded.leaf == graph.leaf
            assert self.store.head(session_id) == graph.leaf
            path = graph.path_nodes(graph.leaf) if graph.leaf else []
            assert texts(self.store.load_path_nodes(session_id)) == texts(path)


def test_the_sql_store_the_file_store_and_a_model_agree(database_url: str, tmp_path: Path) -> None:
    SessionStore(database_url).close()  # migrate once, outside the examples

    class OnThisDatabase(StoresAgree):
        url = database_url
        root = tmp_path

    run_state_machine_as_test(OnThisDatabase, settings=SETTINGS)
