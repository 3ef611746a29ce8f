"""Short node ids: any unique prefix names a node, as git takes them (issue 18 item 10)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import sqlalchemy
from typer.testing import CliRunner

from memstore import AmbiguousNodeError, UnknownNodeError
from memstore.cli import app
from memstore.graph import SessionGraph, short_ids
from memstore.render import render_html
from memstore.store import SessionStore
from memstore.store import short_ids as shortening

from .conftest import LEGACY


@pytest.fixture
def ids(store: SessionStore) -> list[str]:
    handle = store.session("s")
    for n in range(40):
        handle.append({"role": "user", "blocks": [{"kind": "text", "text": f"turn {n}"}]})
    return [node.id for node in store.load_path_nodes("s")]


def test_a_full_id_or_any_unique_prefix_names_its_node(store: SessionStore, ids: list[str]) -> None:
    by_first: dict[str, list[str]] = defaultdict(list)
    for node_id in ids:
        by_first[node_id[0]].append(node_id)
        assert store.resolve_node_id("s", node_id) == node_id
        assert store.resolve_node_id("s", node_id[:12]) == node_id
    for first, named in by_first.items():
        if len(named) == 1:
            assert store.resolve_node_id("s", first) == named[0]


def test_an_ambiguous_prefix_lists_its_candidates(store: SessionStore, ids: list[str]) -> None:
    first = max("0123456789abcdef", key=lambda digit: sum(i.startswith(digit) for i in ids))
    expected = sorted(node_id for node_id in ids if node_id.startswith(first))
    assert len(expected) >= 2  # 40 ids over 16 digits
    with pytest.raises(AmbiguousNodeError) as caught:
        store.resolve_node_id("s", first)
    assert caught.value.candidates == expected[:10]
    assert f"the short id {first!r} is ambiguous" in str(caught.value)
    assert expected[0] in str(caught.value)
    assert isinstance(caught.value, UnknownNodeError)


@pytest.mark.parametrize("wanted", ["", "zz", "%", "_", "\x00", "\ud800"])
def test_a_prefix_no_id_starts_with_is_unknown(
    store: SessionStore, ids: list[str], wanted: str
) -> None:
    with pytest.raises(UnknownNodeError) as caught:
        store.resolve_node_id("s", wanted)
    assert not isinstance(caught.value, AmbiguousNodeError)
    with pytest.raises(UnknownNodeError):
        store.resolve_node_id("other", ids[0][:8])


def test_show_takes_a_short_leaf_id_in_a_real_process(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"

    def memstore(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "memstore.cli", "--db", db, *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    assert memstore("import", str(LEGACY / "branching.jsonl")).returncode == 0
    done = memstore("show", "branching", "--leaf", "35e37295", "--json")
    assert done.returncode == 0, done.stderr
    assert '"id": "35e3729593e09384f705b19d7b9d7588"' in done.stdout
    done = memstore("show", "branching", "--leaf", "3")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: session 'branching': the short id '3' is ambiguous: it starts ")
    assert "35e3729593e09384f705b19d7b9d7588" in line


# --- the shortest unique prefix, shown everywhere (issue 27 item 17) ----------------------------

SHARING = ["line-101", *(f"line-101{n}" for n in range(10)), "line-2", "line-2a", "line-3"]
"""Ids that start one another or share long prefixes, as pi's `line-N` ids do."""


def text_turn(text: str) -> dict[str, object]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def chain(store: SessionStore, session_id: str, ids: list[str]) -> None:
    """Store one turn per id, each under the one before (ids chosen, not hashed)."""
    parent = None
    for node_id in ids:
        made = SessionGraph(session_id, clock=lambda: 1).append(text_turn(f"zebra {node_id}"))
        store.append_node(session_id, made.model_copy(update={"id": node_id, "parent": parent}))
        parent = node_id


def test_the_store_shortens_ids_as_the_graph_does_and_resolves_them_back(
    store: SessionStore, ids: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chain(store, "t", SHARING)
    for session_id, every in (("s", ids), ("t", SHARING)):
        expected = short_ids(every)
        few = every[:: len(every) // 5]
        assert store.short_node_ids(session_id, few) == {i: expected[i] for i in few}
        assert store.short_node_ids(session_id, every) == expected
        for node_id, shown in expected.items():
            assert store.resolve_node_id(session_id, shown) == node_id
        monkeypatch.setattr(shortening, "WHOLE_SESSION", 4)  # the session's ids read whole
        assert store.short_node_ids(session_id, few) == {i: expected[i] for i in few}
        monkeypatch.undo()
    assert store.short_node_ids("t", ["line-10", "nope", "\x00", ids[0]]) == {}
    assert store.short_node_ids("missing", SHARING) == {}


def test_the_ids_of_many_sessions_are_shortened_in_one_statement(
    store: SessionStore, ids: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memstore sessions` and `search` show ids of many sessions: one read for all of them
    (it was one per session), the same short forms as `short_node_ids` gives each session."""
    chain(store, "t", SHARING)
    wanted = [("s", node_id) for node_id in ids[::3]] + [("t", node_id) for node_id in SHARING]
    expected = {
        (session_id, node_id): shown
        for session_id in ("s", "t")
        for node_id, shown in store.short_node_ids(
            session_id, [node_id for owner, node_id in wanted if owner == session_id]
        ).items()
    }
    assert len(expected) == len(wanted)
    strays = [("missing", ids[0]), ("t", ids[0]), ("s", "\x00"), ("\x00", ids[0])]
    reads: list[str] = []
    if isinstance(store, SessionStore):  # the async variants run on their own engine
        sqlalchemy.event.listen(
            store.engine,
            "before_cursor_execute",
            lambda *args: reads.append(args[2]) if "FROM nodes" in args[2] else None,
        )
    assert store.short_node_ids_by_session([*wanted, *strays]) == expected
    assert len(reads) == (1 if isinstance(store, SessionStore) else 0)
    monkeypatch.setattr(shortening, "SESSIONS_AT_ONCE", 1)  # a statement per session
    monkeypatch.setattr(shortening, "WHOLE_SESSION", 4)  # each session's ids read whole
    assert store.short_node_ids_by_session(wanted) == expected
    assert store.short_node_ids_by_session([]) == {}


def test_a_short_id_is_the_shortest_prefix_no_other_id_starts_with() -> None:
    shown = short_ids([*SHARING, "abcdef0123456789", "abcdef0199"])
    assert shown["line-101"] == "line-101"  # it starts line-1010: whole, it names itself
    assert shown["line-1015"] == "line-1015"
    assert shown["line-2"] == "line-2"
    assert shown["line-3"] == "line-3"
    assert shown["abcdef0123456789"] == "abcdef012"
    assert shown["abcdef0199"] == "abcdef019"
    assert short_ids(["0123456789abcdef"]) == {"0123456789abcdef": "01234567"}
    assert short_ids(["ab", "abcdefghijk"], minimum=2) == {"ab": "ab", "abcdefghijk": "abc"}


LONG_SHARED = ["aaaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaaa2", "0123456789abcdef"]
"""Two ids that share their first 16 characters (a 12-character cut named neither), and one
that 8 characters name."""


def test_every_command_shows_the_ids_show_leaf_opens(sqlite_url: str, tmp_path: Path) -> None:
    with SessionStore(sqlite_url) as store:
        chain(store, "s", LONG_SHARED)
    shown = short_ids(LONG_SHARED)
    assert list(shown.values()) == ["0123456789abcdef"[:8], *LONG_SHARED[:2]]

    def memstore(*args: str) -> str:
        result = CliRunner().invoke(app, ["--db", sqlite_url, *args], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return result.stdout

    outputs = {
        "tree": memstore("tree", "s"),
        "sessions": memstore("sessions"),
        "search": memstore("search", "zebra"),
        "show": memstore("show", "s"),
    }
    for command, output in outputs.items():
        expected = [shown["0123456789abcdef"]] if command == "sessions" else list(shown.values())
        for short in expected:
            assert re.search(rf"(^|\s){re.escape(short)}(\s|$)", output, re.M), (command, output)
        assert "0123456789ab " not in output, command  # the old 12-character cut
        assert "aaaaaaaaaaaa " not in output, command
    for node_id, short in shown.items():
        opened = json.loads(memstore("show", "s", "--leaf", short, "--json"))
        assert opened[-1]["id"] == node_id
    page = render_html(SessionStore(sqlite_url).load_session("s"))
    for node_id, short in shown.items():
        assert f'title="{node_id}">{short}</code>' in page


def test_an_ambiguous_short_id_is_one_line_listing_its_candidates(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        chain(store, "s", LONG_SHARED)
    result = CliRunner().invoke(app, ["--db", sqlite_url, "show", "s", "--leaf", "aaaaaaaaaaaa"])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: session 's': the short id 'aaaaaaaaaaaa' is ambiguous: it starts "
        "aaaaaaaaaaaaaaaa1, aaaaaaaaaaaaaaaa2; give more of the id\n"
    )
