"""Big inputs: memory follows the largest record, not the file."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import memstore.jsonl
from memstore import SessionStore, jsjson
from memstore.errors import InvalidArgumentError, JsonlError
from memstore.hashing import hash_node_text
from memstore.jsonl import CHUNK_SIZE, MAX_LINE_BYTES, head_line, node_line, read_lines
from memstore.types import SessionNode, Turn

from .conftest import LEGACY

# Peak memory from /proc (VmHWM): ru_maxrss would carry over the parent's peak across exec.
MEASURE = """
import sys
from memstore import SessionStore

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024

store = SessionStore(sys.argv[1])
store.list_sessions()
before = peak_mb()
report = store.import_jsonl(sys.argv[2])
store.export_jsonl(report.files[0].session_id, sys.argv[3])
print(before, peak_mb(), report.records)
"""


def write_big_session(path: Path, megabytes: int) -> int:
    """A linear session made of the large fixture's turns, repeated under fresh ids."""
    turns = [
        jsjson.dumps(jsjson.loads(line)["node"]["turn"])
        for line in (LEGACY / "large-session.jsonl").read_text().split("\n")
        if line.startswith('{"type":"node"')
    ]
    parent: str | None = None
    written = records = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        while written < megabytes * 1_000_000:
            turn_json = turns[records % len(turns)]
            created_at = 1_767_225_600_000 + records
            node_id = hash_node_text(parent, turn_json.encode(), created_at)
            text = node_line(node_id, parent, turn_json, created_at) + head_line(node_id)
            written += out.write(text)
            parent = node_id
            records += 1
    return records * 2


@pytest.mark.slow
def test_importing_and_exporting_a_big_file_keeps_memory_bounded(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    records = write_big_session(source, 80)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURE,
            f"sqlite:///{tmp_path / 'db.sqlite'}",
            str(source),
            str(tmp_path / "out.jsonl"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    before, after, imported = map(int, done.stdout.split())
    assert imported == records
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()
    # 80 MB went through; the process grew by a small fraction of that.
    assert after - before < 40, json.dumps({"before_mb": before, "after_mb": after})


# --- numbers and lines the databases cannot hold: refused up front, by line ---------------------


def one_node_file(path: Path, created_at_json: str) -> None:
    """A file of two good lines, then a node whose createdAt is written as `created_at_json`."""
    first = node_line("a", None, '{"role":"user","blocks":[]}', 1) + head_line("a")
    bad = (
        '{"type":"node","node":{"id":"b","parent":"a","turn":{"role":"user","blocks":[]},'
        f'"createdAt":{created_at_json}}}}}\n'
    )
    path.write_text(first + bad + head_line("b"), encoding="utf-8")


@pytest.mark.parametrize("created_at", ["9223372036854775808", "1e21", "-1e19"])
def test_a_created_at_the_databases_cannot_hold_is_refused_naming_its_line(
    database_url: str, tmp_path: Path, created_at: str
) -> None:
    source = tmp_path / "big-time.jsonl"
    one_node_file(source, created_at)
    with SessionStore(database_url) as store:
        with pytest.raises(JsonlError, match=r"big-time\.jsonl:3: node\.createdAt .* out of range"):
            store.import_jsonl(source, keep_mismatched=True)
        assert store.list_sessions() == []


def test_the_largest_created_at_the_databases_hold_round_trips(
    database_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "edge.jsonl"
    one_node_file(source, str(2**63 - 1))
    with SessionStore(database_url) as store:
        store.import_jsonl(source, keep_mismatched=True)
        store.export_jsonl("edge", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()


def test_a_node_appended_with_a_time_out_of_range_is_refused(database_url: str) -> None:
    node = SessionNode(id="x", parent=None, turn=Turn(role="user", blocks=[]), created_at=2**63)
    with SessionStore(database_url) as store:
        with pytest.raises(InvalidArgumentError, match="out of the range"):
            store.append_node("s", node)
        assert store.list_sessions() == []


TOO_LONG = """
import sys
import memstore.jsonl
from memstore import SessionStore
from memstore.errors import JsonlError

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024

memstore.jsonl.MAX_LINE_BYTES = 8 << 20
store = SessionStore(sys.argv[1])
store.list_sessions()
before = peak_mb()
try:
    store.import_jsonl(sys.argv[2], keep_mismatched=True)
except JsonlError as error:
    print(error)
print(before, peak_mb(), store.list_sessions())
"""


def test_a_line_longer_than_the_limit_is_refused_by_line_before_it_is_held(
    database_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "huge.jsonl"
    with source.open("wb") as out:
        out.write(
            (node_line("a", None, '{"role":"user","blocks":[]}', 1) + head_line("a")).encode()
        )
        out.truncate(out.tell() + 200_000_000)  # a 200 MB third line of NULs, without a newline
    done = subprocess.run(
        [sys.executable, "-c", TOO_LONG, database_url, str(source)],
        capture_output=True,
        text=True,
        check=True,
    )
    message, figures = done.stdout.strip().split("\n")
    assert message.startswith(f"{source}:3: the line is longer than 8 MiB")
    before, after, sessions = figures.split(" ", 2)
    assert sessions == "[]"
    assert int(after) - int(before) < 40  # the limit (8 MB) and a chunk, not 200 MB


class EndlessLine(io.BytesIO):
    """A stream of `x` that never ends and never holds a newline."""

    def read(self, size: int | None = -1) -> bytes:
        return b"x" * (size or 1)


def test_an_endless_line_is_refused_once_it_passes_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memstore.jsonl, "MAX_LINE_BYTES", 4 * CHUNK_SIZE)
    stream = EndlessLine()
    with pytest.raises(JsonlError, match="<stream>:1: the line is longer than 4 MiB"):
        list(read_lines(stream))
    assert MAX_LINE_BYTES == 256 << 20


# --- one huge turn: memory per record within a documented factor, whatever its shape ----------

MEMORY_FACTOR = 20  # docs/reliability.md, "Any stored turn renders"
HTML_MEMORY_FACTOR = 25  # the HTML page is built whole, then scrubbed: the same section

# Runs one CLI command in this process after a warm-up command; prints the peak before and after.
HUGE_TURN = """
import sys
from memstore.cli import app

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

url, report, *command = sys.argv[1:]
def run(*args):
    try:
        app(["--db", url, *args], standalone_mode=False)
    except SystemExit as stop:
        assert not stop.code, stop.code
run("sessions")  # the warm-up: the modules and the connection every command needs
before = peak_mb()
run(*command)
with open(report, "w") as out:
    out.write(f"{before} {peak_mb()}")
"""


def huge_turn(path: Path, shape: str) -> int:
    """A session of one turn: 200,000 tiny text blocks, or one block of 6 MB; returns the
    bytes of its line."""
    if shape == "many blocks":
        blocks = ",".join(['{"kind":"text","text":"x"}'] * 200_000)
    else:
        blocks = '{"kind":"text","text":"' + "word " * 1_200_000 + '"}'
    turn_json = f'{{"role":"user","blocks":[{blocks}]}}'
    node_id = hash_node_text(None, turn_json.encode(), 1_767_225_600_000)
    line = node_line(node_id, None, turn_json, 1_767_225_600_000)
    path.write_text(line + head_line(node_id))
    return len(line)


def grown_mb(database_url: str, tmp_path: Path, *command: str) -> float:
    """How much a fresh process's peak memory grew running one CLI command."""
    report = tmp_path / "peak.txt"
    subprocess.run(
        [sys.executable, "-c", HUGE_TURN, database_url, str(report), *command],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    before, after = map(float, report.read_text().split())
    return after - before


def exports_byte_for_byte(database_url: str, tmp_path: Path, source: Path) -> bool:
    """Whether the session `huge` exports as JSONL to exactly the bytes of `source`."""
    exported = tmp_path / "out.jsonl"
    grown_mb(database_url, tmp_path, "export", "huge", "-o", str(exported))
    return exported.read_bytes() == source.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["many blocks", "one block"])
def test_a_huge_turn_imports_shows_and_exports_within_the_memory_factor(
    sqlite_url: str, tmp_path: Path, shape: str
) -> None:
    source = tmp_path / "huge.jsonl"
    megabytes = huge_turn(source, shape) / 2**20
    grown = {
        "import": grown_mb(sqlite_url, tmp_path, "import", str(source)),
        "show": grown_mb(sqlite_url, tmp_path, "show", "huge", "--last", "1"),
        "export md": grown_mb(
            sqlite_url, tmp_path, "export", "huge", "--format", "md", "-o", str(tmp_path / "h.md")
        ),
        "show --json": grown_mb(sqlite_url, tmp_path, "show", "huge", "--json"),
    }
    html = tmp_path / "h.html"
    html_grown = grown_mb(
        sqlite_url, tmp_path, "export", "huge", "--format", "html", "-o", str(html)
    )
    factors = {name: round(mb / megabytes, 1) for name, mb in grown.items()}
    assert max(factors.values()) <= MEMORY_FACTOR, factors
    assert html_grown / megabytes <= HTML_MEMORY_FACTOR, round(html_grown / megabytes, 1)
    assert exports_byte_for_byte(sqlite_url, tmp_path, source)
    shown = subprocess.run(
        [sys.executable, "-m", "memstore", "--db", sqlite_url, "show", "huge", "--last", "1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    more = "199,000 more blocks" if shape == "many blocks" else "5,980,000 more characters"
    assert f"… {more} (export the session to read all)" in shown


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["many blocks", "one block"])
def test_a_huge_turn_imports_within_the_memory_factor_on_postgresql(
    postgres_url: str, tmp_path: Path, shape: str
) -> None:
    source = tmp_path / "huge.jsonl"
    megabytes = huge_turn(source, shape) / 2**20
    factor = grown_mb(postgres_url, tmp_path, "import", str(source)) / megabytes
    assert factor <= MEMORY_FACTOR, round(factor, 1)
    assert exports_byte_for_byte(postgres_url, tmp_path, source)
