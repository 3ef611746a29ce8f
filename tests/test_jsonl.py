"""JSONL import and export: byte-identical, incremental, all-or-nothing, on every backend."""

from __future__ import annotations

import contextlib
import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import (
    InvalidSessionIdError,
    JsonlError,
    SessionGraph,
    estimate_context_tokens,
    jsjson,
)
from memstore.errors import InvalidArgumentError, UnknownSessionError
from memstore.jsonl import (
    JsonlSessionStore,
    Line,
    Record,
    append_lines,
    head_line,
    node_line,
    parse_record,
)
from memstore.store import SessionStore, create_store_engine

from .conftest import LEGACY, LEGACY_FILES, expected_for

TABLES = ("sessions", "session_tags", "nodes", "records")


def database_rows(store: SessionStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read with plain SQL (to prove a refused import changed none)."""
    url = store.engine.url
    engine = create_store_engine(url.set(drivername=url.get_backend_name()))
    try:
        with engine.connect() as connection:
            return {
                table: sorted(
                    tuple(map(str, row))
                    for row in connection.execute(sqlalchemy.text(f"SELECT * FROM {table}"))
                )
                for table in TABLES
            }
    finally:
        engine.dispose()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def round_trip(store: SessionStore, source: Path, tmp_path: Path) -> bytes:
    report = store.import_jsonl(source)
    (item,) = report.files
    out = tmp_path / "out" / source.name
    store.export_jsonl(item.session_id, out)
    return out.read_bytes()


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_every_legacy_file_round_trips_byte_for_byte(
    store: SessionStore, path: Path, tmp_path: Path
) -> None:
    assert round_trip(store, path, tmp_path) == path.read_bytes()
    expected = expected_for(path)
    assert store.head(path.stem) == expected["leaf"]
    assert [n.id for n in store.load_path_nodes(path.stem)] == expected["pathIds"]
    assert estimate_context_tokens(store.load_path(path.stem)) == expected["pathTokenEstimate"]
    assert store.load_session(path.stem).size == expected["nodeCount"]


def test_the_import_report(store: SessionStore) -> None:
    report = store.import_jsonl(LEGACY)
    assert [item.session_id for item in report.files] == [p.stem for p in LEGACY_FILES]
    by_id = {item.session_id: item for item in report.files}
    branching = by_id["branching"]
    expected = expected_for(LEGACY / "branching.jsonl")
    assert (branching.records, branching.nodes) == (expected["lineCount"], expected["nodeCount"])
    assert branching.leaf == expected["leaf"]
    assert branching.warnings == []
    assert report.records == sum(expected_for(p)["lineCount"] for p in LEGACY_FILES)


NODE = json.loads((LEGACY / "linear-chat.jsonl").read_text().split("\n")[0])["node"]
ROOT_ID = NODE["id"]


def node_record(node: dict[str, Any]) -> str:
    return jsjson.dumps({"type": "node", "node": node})


def child(text: str, parent: str, created_at: int = 1767225601000) -> dict[str, Any]:
    from memstore import hash_node

    turn = {"role": "assistant", "blocks": [{"kind": "text", "text": text}]}
    return {
        "id": hash_node(parent, turn, created_at),
        "parent": parent,
        "turn": turn,
        "createdAt": created_at,
    }


CHILD = child("hello", ROOT_ID)

UNUSUAL_BUT_VALID = {
    "spaces": f'{{ "type" : "node", "node" : {json.dumps(NODE)} }}\n'
    f'{{"type": "head", "leaf": "{ROOT_ID}"}}\n',
    "escapes": node_record(NODE).replace("Hi!", "H\\u0069!") + "\n",
    "key-order": json.dumps({"node": NODE, "type": "node"}, separators=(",", ":")) + "\n",
    "unknown-types": node_record(NODE)
    + '\n{"type":"checkpoint","at":5}\n{"type":"head","leaf":"'
    + ROOT_ID
    + '"}\n',
    "blank-lines": "\n" + node_record(NODE) + "\n\n  \n",
    "crlf": node_record(NODE) + "\r\n",
    "extra-node-keys": node_record({**NODE, "sessionHint": "x"}) + "\n",
    "unterminated-final-record": node_record(NODE) + "\n" + node_record(CHILD),
    "numbers": node_record({**NODE, "createdAt": 1767225600000.0}).replace(
        "1767225600000", "1767225600000.0"
    )
    + "\n",
}


@pytest.mark.parametrize("text", UNUSUAL_BUT_VALID.values(), ids=UNUSUAL_BUT_VALID.keys())
def test_valid_files_the_original_writer_would_not_write_still_round_trip(
    store: SessionStore, text: str, tmp_path: Path
) -> None:
    source = write(tmp_path / "in" / "s.jsonl", text.encode())
    assert round_trip(store, source, tmp_path) == source.read_bytes()


def build_graph(session_id: str) -> SessionGraph:
    clock = itertools.count(1_767_225_600_000, 997)
    graph = SessionGraph(session_id, clock=clock.__next__)
    root = graph.append({"role": "user", "blocks": [{"kind": "text", "text": "q"}]})
    graph.append(
        {
            "role": "assistant",
            "blocks": [
                {"kind": "tool_call", "id": "c", "name": "n", "input": {"b": 1, "2": [0.5, 1e21]}}
            ],
        }
    )
    graph.branch_from(root.id)
    graph.append({"role": "assistant", "blocks": [{"kind": "text", "text": "é 😀 \u2028"}]})
    return graph


def test_a_session_built_in_python_exports_what_the_original_store_writes(
    store: SessionStore, tmp_path: Path
) -> None:
    graph = build_graph("py")
    files = JsonlSessionStore(tmp_path / "files")
    for node in graph.all():
        store.append_node("py", node)
        files.append_node("py", node)
    store.append_node("py", graph.all()[0])
    files.append_node("py", graph.all()[0])
    store.export_jsonl("py", tmp_path / "exported.jsonl")
    assert (tmp_path / "exported.jsonl").read_bytes() == (tmp_path / "files/py.jsonl").read_bytes()


def test_reimporting_an_unchanged_file_changes_nothing(store: SessionStore) -> None:
    store.import_jsonl(LEGACY / "branching.jsonl")
    before = database_rows(store)
    report = store.import_jsonl(LEGACY / "branching.jsonl")
    assert report.files[0].unchanged
    assert report.records == 0
    assert database_rows(store) == before


def test_a_grown_file_adds_only_its_new_records(store: SessionStore, tmp_path: Path) -> None:
    lines = (LEGACY / "linear-chat.jsonl").read_bytes().split(b"\n")
    source = write(tmp_path / "chat.jsonl", b"\n".join(lines[:10]) + b"\n")
    assert store.import_jsonl(source).records == 10
    source.write_bytes((LEGACY / "linear-chat.jsonl").read_bytes())
    report = store.import_jsonl(source)
    assert report.records == len(lines) - 1 - 10
    store.export_jsonl("chat", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()


def changed_line(lines: list[bytes], number: int) -> list[bytes]:
    """`lines` with line `number` (1-based) still valid JSON but no longer the same bytes."""
    return [*lines[: number - 1], lines[number - 1].replace(b'":', b'": ', 1), *lines[number:]]


PREFIX_CHANGES = {
    "first-node-line": lambda lines: (changed_line(lines, 1), 1),
    "a-head-line": lambda lines: (changed_line(lines, 12), 12),  # an append's second line
    "a-later-node-line": lambda lines: (changed_line(lines, 21), 21),
    "cut-short": lambda lines: ([*lines[:6], lines[6][:40]], 7),
}


@pytest.mark.parametrize("change", PREFIX_CHANGES.values(), ids=PREFIX_CHANGES.keys())
@pytest.mark.parametrize("batch_rows", [3, 1000])
def test_a_changed_prefix_is_refused_naming_its_first_changed_line(
    store: SessionStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: Any,
    batch_rows: int,
) -> None:
    monkeypatch.setattr("memstore.store.import_batch.BATCH_ROWS", batch_rows)
    original = (LEGACY / "linear-chat.jsonl").read_bytes()
    source = write(tmp_path / "chat.jsonl", original)
    store.import_jsonl(source)
    before = database_rows(store)
    lines, number = change(original.split(b"\n"))
    source.write_bytes(b"\n".join(lines))
    with pytest.raises(JsonlError, match=rf"chat.jsonl:{number}: this line differs"):
        store.import_jsonl(source)
    assert database_rows(store) == before


def line(number: int, text: str, path: str = "bad.jsonl") -> str:
    return f"{path}:{number}: {text}"


GOOD = node_record(NODE) + "\n" + jsjson.dumps({"type": "head", "leaf": ROOT_ID}) + "\n"
BAD_INPUT = {
    "not-json": (GOOD + "{not json\n", 3, "not valid JSON"),
    "not-an-object": (GOOD + "[1,2]\n", 3, 'a record must be an object with a string "type"'),
    "no-type": (GOOD + '{"kind":"node"}\n', 3, 'string "type"'),
    "node-without-turn": (
        GOOD + '{"type":"node","node":{"id":"x","parent":null,"createdAt":1}}\n',
        3,
        "turn must be an object",
    ),
    "bad-role": (
        node_record({**NODE, "turn": {"role": "system", "blocks": []}}) + "\n",
        1,
        "turn.role",
    ),
    "bad-block": (
        node_record({**NODE, "turn": {"role": "user", "blocks": [{"kind": "text"}]}}) + "\n",
        1,
        '"text"',
    ),
    "bad-created-at": (node_record({**NODE, "createdAt": "yesterday"}) + "\n", 1, "createdAt"),
    "unknown-head": (GOOD + '{"type":"head","leaf":"nope"}\n', 3, "head names 'nope'"),
    "unknown-parent": (node_record(CHILD) + "\n", 1, f"names parent {ROOT_ID!r}"),
    "conflicting-duplicate": (
        GOOD + node_record({**NODE, "turn": {"role": "user", "blocks": []}}) + "\n",
        3,
        "different content",
    ),
    "forged-id": (node_record({**NODE, "id": "f" * 32}) + "\n", 1, "is not its content hash"),
}


@pytest.mark.parametrize(("text", "number", "problem"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_names_file_and_line_and_changes_nothing(
    store: SessionStore, tmp_path: Path, text: str, number: int, problem: str
) -> None:
    store.import_jsonl(LEGACY / "linear-chat.jsonl")
    before = database_rows(store)
    source = write(tmp_path / "bad.jsonl", text.encode())
    with pytest.raises(JsonlError) as info:
        store.import_jsonl(source)
    assert f"bad.jsonl:{number}: " in str(info.value)
    assert problem in str(info.value)
    assert info.value.line == number
    assert database_rows(store) == before


@pytest.mark.parametrize(
    ("data", "number", "problem"),
    [
        (b"\xef\xbb\xbf" + GOOD.encode(), 1, "byte order mark"),
        (GOOD.encode() + b'{"type":"other","x":"\xff\xfe"}\n', 3, "invalid UTF-8"),
    ],
    ids=["bom", "invalid-utf8"],
)
def test_encoding_errors_name_the_line(
    store: SessionStore, tmp_path: Path, data: bytes, number: int, problem: str
) -> None:
    source = write(tmp_path / "bad.jsonl", data)
    with pytest.raises(JsonlError, match=f"bad.jsonl:{number}: .*{problem}"):
        store.import_jsonl(source)
    assert store.list_sessions() == []


def test_a_torn_final_line_is_recovered_with_a_warning(store: SessionStore, tmp_path: Path) -> None:
    torn = GOOD + node_record(CHILD)[:40]
    source = write(tmp_path / "torn.jsonl", torn.encode())
    report = store.import_jsonl(source)
    (warning,) = report.warnings
    assert "torn.jsonl:3" in warning
    assert "torn" in warning
    assert report.records == 2
    assert store.head("torn") == ROOT_ID
    # The writer comes back and finishes the line: the next import takes the rest.
    source.write_bytes((GOOD + node_record(CHILD) + "\n").encode())
    assert store.import_jsonl(source).records == 1
    store.export_jsonl("torn", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()


def test_a_forged_id_can_be_kept_on_request(store: SessionStore, tmp_path: Path) -> None:
    forged = node_record({**NODE, "id": "f" * 32}) + "\n"
    source = write(tmp_path / "forged.jsonl", forged.encode())
    report = store.import_jsonl(source, keep_mismatched=True)
    (warning,) = report.warnings
    assert "forged.jsonl:1" in warning
    assert store.load_session("forged").size == 1
    assert (
        store.import_jsonl(write(tmp_path / "f2.jsonl", forged.encode()), verify=False).nodes == 1
    )


class RenameText:
    """A migrator from an imaginary older format whose text blocks said `body`."""

    id = "body-to-text"

    def upgrade(self, raw: Any) -> Any:
        if isinstance(raw, dict) and raw.get("type") == "node":
            for block in raw["node"]["turn"]["blocks"]:
                if "body" in block:
                    block["text"] = block.pop("body")
        return raw


def test_records_pass_through_the_migrators(open_store: Any, tmp_path: Path) -> None:
    store: SessionStore = open_store(migrators=[RenameText()])
    old = node_record(NODE).replace('"text":"', '"body":"', 1) + "\n" + GOOD.split("\n")[1] + "\n"
    source = write(tmp_path / "old.jsonl", old.encode())
    store.import_jsonl(source, verify=False)
    (turn,) = store.load_path("old")
    assert turn.to_json()["blocks"][0]["text"] == NODE["turn"]["blocks"][0]["text"]
    store.export_jsonl("old", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == old.encode()  # the file's own bytes


def test_import_options_and_missing_paths(store: SessionStore, tmp_path: Path) -> None:
    report = store.import_jsonl(LEGACY / "unicode.jsonl", session_id="renamed")
    assert report.files[0].session_id == "renamed"
    assert store.list_sessions() == ["renamed"]
    with pytest.raises(JsonlError, match="no such file"):
        store.import_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="single file"):
        store.import_jsonl(LEGACY, session_id="x")
    with pytest.raises(InvalidSessionIdError):
        store.import_jsonl(LEGACY / "unicode.jsonl", session_id="../escape")


def test_export_of_an_unknown_session_leaves_no_file(store: SessionStore, tmp_path: Path) -> None:
    with pytest.raises(UnknownSessionError):
        store.export_jsonl("nope", tmp_path / "out" / "nope.jsonl")
    assert list((tmp_path / "out").iterdir()) == []


# --- the file-backed store --------------------------------------------------------------------


def test_the_jsonl_store_reads_what_it_writes(tmp_path: Path) -> None:
    files = JsonlSessionStore(tmp_path / "root")
    assert files.list_sessions() == []
    assert files.load_session("none").size == 0
    graph = build_graph("g")
    for node in graph.all():
        files.append_node("g", node)
    loaded = files.load_session("g")
    assert loaded.all() == graph.all()
    assert loaded.leaf == graph.leaf
    assert files.list_sessions() == ["g"]


@pytest.mark.parametrize("bad", ["../escape", "a/b", "..", "nul\x00", "", "a\\b"])
def test_the_jsonl_store_refuses_ids_that_leave_its_root(tmp_path: Path, bad: str) -> None:
    files = JsonlSessionStore(tmp_path / "root")
    graph = build_graph("g")
    with pytest.raises(InvalidSessionIdError):
        files.append_node(bad, graph.all()[0])
    with pytest.raises(InvalidSessionIdError):
        files.load_session(bad)
    assert not (tmp_path / "escape.jsonl").exists()


def test_the_jsonl_store_refuses_ids_too_long_for_a_file_name(tmp_path: Path) -> None:
    files = JsonlSessionStore(tmp_path)
    node = build_graph("g").all()[0]
    files.append_node("é" * 122, node)  # 244 bytes + ".jsonl": 250, fits
    with pytest.raises(InvalidSessionIdError, match="too long for a file name"):
        files.append_node("é" * 125, node)  # 250 bytes + ".jsonl": 256
    assert files.list_sessions() == ["é" * 122]


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_the_jsonl_store_loads_legacy_files_as_the_original(path: Path) -> None:
    expected = expected_for(path)
    graph = JsonlSessionStore(LEGACY).load_session(path.stem)
    assert graph.leaf == expected["leaf"]
    assert graph.size == expected["nodeCount"]


# --- generated sessions ---------------------------------------------------------------------

texts = st.text(
    st.characters(codec="utf-16", exclude_categories=["Cs"]), max_size=20
) | st.sampled_from(["", "\u2028", "\ud800", "😀", '"\\'])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats() | texts,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["a", "1", "01", "b", "4294967295"]) | texts, inner, max_size=3
        )
    ),
    max_leaves=8,
)
blocks = st.one_of(
    st.builds(lambda t: {"kind": "text", "text": t}, texts),
    st.builds(lambda t: {"kind": "thinking", "text": t}, texts),
    st.builds(
        lambda i, v: {"kind": "tool_call", "id": i, "name": "tool", "input": v}, texts, json_values
    ),
    st.builds(
        lambda i, v, e: {"kind": "tool_result", "callId": i, "output": v, "isError": e},
        texts,
        json_values,
        st.booleans(),
    ),
    st.builds(lambda v: {"kind": "x-custom", "payload": v}, json_values),
)
turns = st.builds(
    lambda role, bs: {"role": role, "blocks": bs},
    st.sampled_from(["user", "assistant"]),
    st.lists(blocks, max_size=3),
)
operations = st.lists(st.tuples(st.booleans(), st.integers(0, 50), turns), min_size=1, max_size=12)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=operations)
def test_generated_sessions_round_trip_byte_for_byte(
    store: SessionStore, tmp_path: Path, operations: list[tuple[bool, int, dict[str, Any]]]
) -> None:
    session_id = f"gen-{uuid.uuid4().hex}"
    ticks = itertools.cycle([1, 1, 2])  # repeated times make content-hash collisions
    graph = SessionGraph(session_id, clock=lambda: next(ticks))
    files = JsonlSessionStore(tmp_path / "gen")
    for branch, pick, turn in operations:
        if branch and graph.size:
            graph.branch_from(graph.all()[pick % graph.size].id)
        node = graph.append(turn)
        files.append_node(session_id, node)
    source = tmp_path / "gen" / f"{session_id}.jsonl"
    assert round_trip(store, source, tmp_path) == source.read_bytes()
    loaded = store.load_session(session_id)
    assert [jsjson.dumps(n.to_json()) for n in loaded.all()] == [
        jsjson.dumps(n.to_json()) for n in graph.all()
    ]
    assert loaded.leaf == graph.leaf


@given(
    node_id=st.text() | st.text("0123456789abcdef", min_size=32, max_size=32),
    parent=st.none() | st.text(max_size=4) | st.just("a1B2"),
    created_at=st.integers() | st.sampled_from([2**53 - 1, 2**53, -(2**53) + 1, 10**21]),
)
def test_record_lines_render_ids_and_times_as_json_stringify_does(
    node_id: str, parent: str | None, created_at: int
) -> None:
    """The quick paths for plain ids and safe integers agree with the general encoder."""
    expected = (
        f'{{"type":"node","node":{{"id":{jsjson.dumps(node_id)},"parent":{jsjson.dumps(parent)},'
        f'"turn":{{}},"createdAt":{jsjson.dumps(created_at)}}}}}\n'
    )
    assert node_line(node_id, parent, "{}", created_at) == expected
    assert head_line(node_id) == f'{{"type":"head","leaf":{jsjson.dumps(node_id)}}}\n'
    assert append_lines(node_id, parent, "{}", created_at) == expected + head_line(node_id)


class Unchanged:
    """A migrator that changes nothing: it makes the reader take its general path."""

    id = "unchanged"

    def upgrade(self, raw: Any) -> Any:
        return raw


@given(
    leaf=st.text(max_size=6) | st.text("0123456789abcdefXYZ", min_size=1, max_size=40),
    start=st.sampled_from(['{"type":"head","leaf":', '{"type": "head","leaf":', '{"leaf":']),
    end=st.sampled_from(["}", " }", "}}", ',"x":1}']),
    terminated=st.booleans(),
)
def test_the_quick_path_for_head_lines_agrees_with_parsing_them(
    leaf: str, start: str, end: str, terminated: bool
) -> None:
    """Canonical head lines skip the JSON parser; every line reads as the parser reads it."""
    text = start + jsjson.dumps(leaf) + end
    line = Line(7, 0, text.encode("utf-8", "surrogatepass"), terminated)

    def parsed(migrators: list[Any]) -> Record | str:
        try:
            return parse_record("f.jsonl", line, migrators)
        except JsonlError as error:
            return str(error)

    assert parsed([]) == parsed([Unchanged()])


@pytest.mark.parametrize(("text", "number", "problem"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_named_the_same_across_read_ahead_chunks(
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    number: int,
    problem: str,
) -> None:
    """Imports read ahead a chunk of lines to look their ids up at once; with chunks of two
    lines, the bad line is still the one named, and a later unparsable line does not win."""
    monkeypatch.setattr("memstore.store.import_batch.BATCH_ROWS", 2)
    with SessionStore(sqlite_url) as opened:
        source = write(tmp_path / "bad.jsonl", (text + "{not json\n").encode())
        with pytest.raises(JsonlError) as info:
            opened.import_jsonl(source)
        assert (info.value.line, problem in str(info.value)) == (number, True)
        assert opened.list_sessions() == []


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_legacy_files_round_trip_with_tiny_read_ahead_chunks(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: Path
) -> None:
    """Batches of two records: a repeated node line falls in another batch than its first."""
    monkeypatch.setattr("memstore.store.import_batch.BATCH_ROWS", 2)
    with SessionStore(database_url) as opened:
        assert round_trip(opened, path, tmp_path) == path.read_bytes()
        assert opened.head(path.stem) == expected_for(path)["leaf"]


@pytest.mark.parametrize("batch_rows", [2, 1000])
def test_export_does_not_need_nodes_stored_in_the_order_the_log_names_them(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_rows: int
) -> None:
    """Export merges the log with the nodes in stored order as a fast path; when the order
    differs, each line is still rendered from its own node, and a grown file still imports."""
    monkeypatch.setattr("memstore.store.import_batch.BATCH_ROWS", batch_rows)
    original = (LEGACY / "collision.jsonl").read_bytes()
    source = write(tmp_path / "s.jsonl", original[: original.index(b"\n", len(original) // 2) + 1])
    with SessionStore(database_url) as opened:
        opened.import_jsonl(source)
        with opened.engine.begin() as connection:  # store the nodes in reverse order
            connection.execute(sqlalchemy.text("UPDATE nodes SET pk = -pk"))
        assert export(opened, "s", tmp_path / "prefix.jsonl") == source.read_bytes()
        source.write_bytes(original)
        assert opened.import_jsonl(source).records > 0
        assert export(opened, "s", tmp_path / "all.jsonl") == original


def export(store: SessionStore, session_id: str, path: Path) -> bytes:
    store.export_jsonl(session_id, path)
    return path.read_bytes()


def test_import_files_expands_paths_imports_each_file_and_collects_the_refused(
    store: SessionStore, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for path in LEGACY_FILES[:2]:
        (folder / path.name).write_bytes(path.read_bytes())
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n")
    seen: list[str] = []

    @contextlib.contextmanager
    def file_progress(file: Path) -> Iterator[Callable[[int, int], None]]:
        seen.append(file.name)
        yield lambda done, records: None

    report = store.import_files([bad, folder], file_progress=file_progress)
    assert seen == ["bad.jsonl", *(path.name for path in LEGACY_FILES[:2])]
    assert [item.session_id for item in report.files] == [p.stem for p in LEGACY_FILES[:2]]
    (failure,) = report.failures
    assert isinstance(failure, JsonlError)
    assert "bad.jsonl:1" in str(failure)
    assert store.list_sessions() == sorted(p.stem for p in LEGACY_FILES[:2])
    with pytest.raises(InvalidArgumentError, match="one legacy file"):
        store.import_files([folder, bad], session_id="x")
    with pytest.raises(InvalidArgumentError, match="unknown source"):
        store.import_files([bad], source="nope")
