"""Importing pi and Claude Code session files: the real samples in ../shared/fixtures/foreign
round-trip byte for byte, imports are incremental, and bad or torn input is refused or recovered
with the database unchanged."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore import jsjson
from memstore.errors import JsonlError
from memstore.foreign import foreign_targets, sniff_format
from memstore.store import SessionStore

from .foreign_lines import claude_code_lines, pi_lines, write_lines

REPO = Path(__file__).resolve().parents[1]


def _foreign_root() -> Path | None:
    """../shared/fixtures/foreign, from the repository or the folder that holds its worktree."""
    for base in (REPO.parent, REPO.parent.parent):
        candidate = base / "shared" / "fixtures" / "foreign"
        if candidate.is_dir():
            return candidate
    return None


FOREIGN = _foreign_root()

# file, agent, nodes, tool calls, branches (leaves), warnings
SAMPLES = [
    ("pi/large-session.jsonl", "pi", 914, 391, 1, 0),
    ("claude-code/edge_cases.jsonl", "claude-code", 12, 3, 12, 1),
    ("claude-code/representative_messages.jsonl", "claude-code", 11, 2, 11, 0),
    ("claude-code/todowrite_examples.jsonl", "claude-code", 11, 3, 1, 0),
]


def foreign_samples() -> Path:
    """The shared samples: skipped when absent, a failure under CI=true."""
    if FOREIGN is None:
        if os.environ.get("CI") == "true":
            pytest.fail("../shared/fixtures/foreign is missing, and CI=true")
        pytest.skip("../shared/fixtures/foreign is absent")
    return FOREIGN


@pytest.fixture
def foreign() -> Path:
    """The shared samples (see `foreign_samples`)."""
    return foreign_samples()


def _stats(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    sql = f"SELECT nodes, tool_calls, branches FROM session_stats WHERE session_id = '{session_id}'"
    return tuple(store.read_only_query(sql).rows[0])


def snapshot(store: SessionStore) -> list[Any]:
    """Everything an import writes, to compare before and after a refused one."""
    tables = ("sessions", "nodes", "node_blocks", "records", "node_usage", "session_tags")
    rows = [store.read_only_query(f"SELECT count(*) FROM {table}").rows for table in tables]
    return [*rows, [(info.id, info.head, info.metadata) for info in store.sessions()]]


@pytest.mark.parametrize(("name", "agent", "nodes", "calls", "branches", "warnings"), SAMPLES)
def test_every_sample_round_trips_byte_for_byte(
    foreign: Path,
    store: SessionStore,
    tmp_path: Path,
    name: str,
    agent: str,
    nodes: int,
    calls: int,
    branches: int,
    warnings: int,
) -> None:
    source = foreign / name
    assert sniff_format(source).format == agent
    report = store.import_foreign(source)
    (item,) = report.files
    assert (item.nodes, len(item.warnings)) == (nodes, warnings)
    assert store.session_info(source.stem).metadata["agent"] == agent
    assert _stats(store, source.stem) == (nodes, calls, branches)
    out = tmp_path / "out.jsonl"
    store.export_jsonl(source.stem, out)
    assert out.read_bytes() == source.read_bytes()
    again = store.import_foreign(source)
    assert again.files[0].unchanged


def test_pi_sample_keeps_usage_cost_and_tool_calls_in_sql(
    foreign: Path, store: SessionStore
) -> None:
    store.import_pi(foreign / "pi" / "large-session.jsonl")
    usage = store.read_only_query(
        "SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd) "
        "FROM node_usage WHERE session_id = 'large-session'"
    ).rows[0]
    assert tuple(usage[:3]) == (453, 1049, 83156)  # as the file sums them
    assert usage[3] == pytest.approx(30.3302, abs=1e-4)
    calls = store.read_only_query(
        "SELECT count(*) FROM tool_calls WHERE session_id = 'large-session' "
        "AND result_node_id IS NOT NULL"
    ).rows[0][0]
    assert calls == 373  # the file's toolResult messages; 18 calls were never answered
    assert store.search("theme", session_id="large-session")
    source = store.read_only_query(
        "SELECT agent, cwd, model, input_tokens FROM session_sources "
        "WHERE session_id = 'large-session'"
    ).rows[0]
    assert tuple(source) == ("pi", "/Users/badlogic/workspaces/pi-mono", "claude-sonnet-4-5", 1049)
    path = store.load_path("large-session")
    assert len(path) == 914
    assert path[0].role == "user"


def _copy_lines(source: Path, target: Path, count: int | None = None) -> None:
    lines = source.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines if count is None else lines[:count]))


@pytest.mark.parametrize("name", [sample[0] for sample in SAMPLES])
def test_a_grown_file_adds_only_its_new_lines(
    foreign: Path, store: SessionStore, tmp_path: Path, name: str
) -> None:
    source = foreign / name
    live = tmp_path / source.name
    total = len(source.read_bytes().splitlines())
    _copy_lines(source, live, total // 2)
    first = store.import_foreign(live).files[0]
    assert first.records == total // 2
    _copy_lines(source, live)
    second = store.import_foreign(live).files[0]
    assert second.records == total - total // 2
    out = tmp_path / "out.jsonl"
    store.export_jsonl(live.stem, out)
    assert out.read_bytes() == source.read_bytes()


def test_a_torn_final_line_is_skipped_then_imported_once_whole(
    foreign: Path, store: SessionStore, tmp_path: Path
) -> None:
    source = foreign / "claude-code" / "todowrite_examples.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    report = store.import_claude_code(live).files[0]
    assert report.records == len(lines) - 1
    assert "torn" in report.warnings[0]
    live.write_bytes(b"".join(lines))
    assert store.import_claude_code(live).files[0].records == 1
    out = tmp_path / "out.jsonl"
    store.export_jsonl("live", out)
    assert out.read_bytes() == source.read_bytes()


def _fuzzed(source: Path, tmp_path: Path, change: Callable[[list[bytes]], None]) -> Path:
    lines = source.read_bytes().splitlines(keepends=True)
    change(lines)
    target = tmp_path / source.name
    target.write_bytes(b"".join(lines))
    return target


@pytest.mark.parametrize("name", [sample[0] for sample in SAMPLES])
def test_a_corrupted_line_is_refused_with_its_line_and_nothing_written(
    foreign: Path, store: SessionStore, tmp_path: Path, name: str
) -> None:
    def corrupt(lines: list[bytes]) -> None:
        lines[3] = lines[3][: len(lines[3]) // 2] + b"\n"

    before = snapshot(store)
    fuzzed = _fuzzed(foreign / name, tmp_path, corrupt)
    with pytest.raises(JsonlError) as refused:
        store.import_foreign(fuzzed, agent="pi" if name.startswith("pi") else "claude-code")
    assert refused.value.line == 4
    assert f"{fuzzed}:4:" in str(refused.value)
    assert snapshot(store) == before


@pytest.mark.parametrize("cut", [1, 200, 5000, 100_000, 555_555])
def test_a_truncated_file_imports_its_whole_lines(
    foreign: Path, store: SessionStore, tmp_path: Path, cut: int
) -> None:
    data = (foreign / "pi" / "large-session.jsonl").read_bytes()[:cut]
    truncated = tmp_path / "cut.jsonl"
    truncated.write_bytes(data)
    item = store.import_pi(truncated).files[0]
    assert item.records == data.count(b"\n")
    assert len(item.warnings) == (0 if data.endswith(b"\n") else 1)
    out = tmp_path / "out.jsonl"
    store.export_jsonl("cut", out)
    assert out.read_bytes() == data[: data.rfind(b"\n") + 1]


def test_a_claude_code_record_whose_parent_is_gone_becomes_a_root(
    foreign: Path, store: SessionStore, tmp_path: Path
) -> None:
    def remove_parent(lines: list[bytes]) -> None:
        del lines[2]  # assistant_001, parent of line 4 (now line 3)

    fuzzed = _fuzzed(foreign / "claude-code" / "todowrite_examples.jsonl", tmp_path, remove_parent)
    item = store.import_claude_code(fuzzed).files[0]
    assert any(warning.startswith(f"{fuzzed}:3:") for warning in item.warnings)
    assert store.load_session(fuzzed.stem)


def test_a_file_of_no_known_agent_is_refused(tmp_path: Path, store: SessionStore) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"type":"node"}\n')
    with pytest.raises(JsonlError, match="look like none of the formats memstore reads"):
        store.import_foreign(other)
    assert store.list_sessions() == []


def test_targets_walk_directories_and_name_subagent_sessions(tmp_path: Path) -> None:
    session = tmp_path / "project" / "abc"
    (session / "subagents").mkdir(parents=True)
    line = '{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"abc","message":{}}\n'
    (tmp_path / "project" / "abc.jsonl").write_text(line)
    (session / "subagents" / "agent-7.jsonl").write_text(line)
    targets = foreign_targets(tmp_path)
    assert [(t.session_id, t.agent, t.parent_session) for t in targets] == [
        ("abc~agent-7", "claude-code", "abc"),
        ("abc", "claude-code", None),
    ]


@pytest.mark.parametrize(
    ("agent", "number", "written", "timestamp"),
    [
        ("pi", 2, rb'"timestamp":"[^"]*"', b"1e300"),  # the entry's time
        ("pi", 3, rb'"timestamp":\d+', b"-1e20"),  # the message's time
        ("claude-code", 1, rb'"timestamp":"[^"]*"', b"9223372036854775808"),
    ],
)
def test_a_time_out_of_range_is_refused_by_file_and_line_with_nothing_written(
    store: SessionStore, tmp_path: Path, agent: str, number: int, written: bytes, timestamp: bytes
) -> None:
    lines = pi_lines("p", 1) if agent == "pi" else claude_code_lines("c", 1)
    lines[number - 1] = re.sub(written, b'"timestamp":' + timestamp, lines[number - 1], count=1)
    path = write_lines(tmp_path / "times.jsonl", lines)
    before = snapshot(store)
    with pytest.raises(JsonlError) as refused:
        store.import_foreign(path, agent=agent)
    as_read = jsjson.loads(timestamp.decode())
    assert str(refused.value).startswith(f"{path}:{number}: timestamp {as_read!r} is out of range")
    assert snapshot(store) == before


def _claude_code_user_line(content: str) -> bytes:
    """A Claude Code transcript's first user record, with `content` (JSON) as its content."""
    lines = claude_code_lines("c", 1)
    return lines[0].replace(b'"content":"prompt 0 about zebras"', b'"content":' + content.encode())


def test_a_string_among_claude_code_content_blocks_is_kept_as_text_and_found(
    store: SessionStore, tmp_path: Path
) -> None:
    path = write_lines(tmp_path / "c.jsonl", [_claude_code_user_line('["wow error"]')])
    item = store.import_claude_code(path).files[0]
    assert item.warnings == []
    assert store.load_path("c")[0].blocks[0].model_dump() == {"kind": "text", "text": "wow error"}
    assert [hit.session_id for hit in store.search("wow")] == ["c"]


@pytest.mark.parametrize(
    ("agent", "content", "kept_as"),
    [
        ("claude-code", '[{"type":"text","text":5}]', "claude.text"),
        ("claude-code", "[7]", "claude.invalid"),
        ("pi", '[{"type":"text","text":null}]', "pi.text"),
    ],
)
def test_a_malformed_content_part_is_kept_with_a_warning_naming_file_and_line(
    store: SessionStore, tmp_path: Path, agent: str, content: str, kept_as: str
) -> None:
    if agent == "pi":
        lines = pi_lines("p", 1)
        written = b'"content":[{"type":"text","text":"question 0 about zebras"}]'
        lines[1] = lines[1].replace(written, b'"content":' + content.encode())
        number = 2
    else:
        lines, number = [_claude_code_user_line(content)], 1
    path = write_lines(tmp_path / "bad.jsonl", lines)
    item = store.import_foreign(path, agent=agent).files[0]
    assert len(item.warnings) == 1
    assert item.warnings[0].startswith(f"{path}:{number}: ")
    assert item.warnings[0].endswith(f"kept as a {kept_as} block, which search does not read")
    assert store.load_path("bad")[0].blocks[0].kind == kept_as


def test_a_nul_in_a_pi_header_is_kept_on_sqlite_and_refused_on_postgresql_naming_the_field(
    store: SessionStore, tmp_path: Path
) -> None:
    """PostgreSQL's text and jsonb cannot hold NUL: the import says which file and field, as a
    JsonlError, and leaves nothing (it was a bare DatabaseError); SQLite keeps the cwd."""
    lines = pi_lines("nul", 2)
    header = jsjson.loads(lines[0])
    header["cwd"] = "/work/a\0b"
    lines[0] = jsjson.dumps_bytes(header) + b"\n"
    path = tmp_path / "nul.jsonl"
    write_lines(path, lines)
    if store.backend.text_holds_nul:
        store.import_foreign(path)
        assert store.session_info("nul").metadata["cwd"] == "/work/a\0b"
        return
    with pytest.raises(JsonlError) as caught:
        store.import_foreign(path)
    assert str(caught.value) == (
        f"{path}: the session's metadata['cwd'] holds a NUL character, which PostgreSQL cannot "
        "store: remove it"
    )
    assert store.list_sessions() == []
