"""Crash safety and limits: writers killed with SIGKILL mid-append and mid-import, big records,
long sessions.

A killed writer leaves the database consistent: every acknowledged append is there, no node lacks
its parent, the head and every record name stored nodes, and an import is all or nothing. The
assertions hold whatever instant the kill lands on; the kill waits for the child to report
progress (acknowledged appends, imported batches), never on a sleep.
"""

from __future__ import annotations

import itertools
import os
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.engine import make_url

from memstore import SessionGraph, SessionNode, SessionStore, jsjson
from memstore.hashing import hash_node_text
from memstore.jsonl import head_line, node_line
from memstore.store import create_store_engine

from .test_limits import write_big_session

pytestmark = pytest.mark.slow  # killed processes and sessions of 200,000 nodes and 50 MB turns

ROOT = Path(__file__).resolve().parent.parent
CRASH_SESSION = "crash"


# --- a child process we can read line by line and kill ---------------------------------------


class Child:
    """A `python -c script` child whose stdout lines are read as they come, with a deadline."""

    def __init__(self, script: str, *args: str, stderr: Path) -> None:
        self._stderr_path = stderr
        self._stderr = stderr.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.lines: list[str] = []
        self._pending = b""

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._stderr.close()

    def _feed(self, chunk: bytes) -> None:
        *complete, self._pending = (self._pending + chunk).split(b"\n")
        self.lines.extend(line.decode() for line in complete)

    def wait_for(self, done: Callable[[list[str]], bool], timeout: float = 120.0) -> None:
        """Read stdout until `done(lines)` holds; fail if the child exits or time runs out."""
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while not done(self.lines):
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"the child said only {self.lines[-3:]}"
                if not selector.select(remaining):
                    continue
                chunk = os.read(stdout.fileno(), 1 << 16)
                if not chunk:
                    self.process.wait()
                    raise AssertionError(
                        f"the child exited ({self.process.returncode}) early: "
                        + self._stderr_path.read_text()[-2000:]
                    )
                self._feed(chunk)

    def kill(self) -> None:
        """SIGKILL the child, then keep every complete line it wrote before dying."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        assert self.process.stdout is not None
        self._feed(self.process.stdout.read())


# --- what the appender appends ------------------------------------------------------------------


def planned_nodes() -> Iterator[SessionNode]:
    """The appender's nodes, always the same: a chain with a branch back every fifth append."""
    clock = itertools.count(1_767_225_600_000, 1000)
    graph = SessionGraph(CRASH_SESSION, clock=clock.__next__)
    ids: list[str] = []
    for n in itertools.count():
        if n % 5 == 4:
            graph.branch_from(ids[n // 2])
        role = "user" if n % 2 == 0 else "assistant"
        turn = {"role": role, "blocks": [{"kind": "text", "text": f"turn {n} " + "x" * (n % 7)}]}
        node = graph.append(turn)
        ids.append(node.id)
        yield node


APPENDER = f"""
import sys
from memstore import SessionStore
from tests.test_reliability_crash import planned_nodes

store = SessionStore(sys.argv[1])
head = store.head({CRASH_SESSION!r})
done = store.load_session({CRASH_SESSION!r}).size
print("started", flush=True)
for node in planned_nodes():
    if done:
        done -= 1
        continue
    store.append_node({CRASH_SESSION!r}, node, expected_head=head)
    head = node.id
    print(node.id, flush=True)
"""


def acknowledged(lines: list[str]) -> list[str]:
    return [line for line in lines if line != "started"]


def sqlite_file(url: str) -> str | None:
    parsed = make_url(url)
    return parsed.database if parsed.get_backend_name() == "sqlite" else None


def check_sqlite_file(url: str) -> None:
    """SQLite's own verdict on the file, read with the plain driver (it replays the WAL)."""
    database = sqlite_file(url)
    if database is None:
        return
    connection = sqlite3.connect(database)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        connection.close()


DANGLING = {  # each lookup by the whole key (the tenant leads it, migration 0030), not a scan
    "nodes whose parent is missing": (
        "SELECT count(*) FROM nodes n WHERE n.parent_id IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM nodes p WHERE p.tenant = n.tenant "
        "AND p.session_id = n.session_id AND p.id = n.parent_id)"
    ),
    "heads naming a missing node": (
        "SELECT count(*) FROM sessions s WHERE s.head IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM nodes n WHERE n.tenant = s.tenant "
        "AND n.session_id = s.id AND n.id = s.head)"
    ),
    "records naming a missing node": (
        "SELECT count(*) FROM records r WHERE r.node_id IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM nodes n WHERE n.tenant = r.tenant "
        "AND n.session_id = r.session_id AND n.id = r.node_id)"
    ),
    "blocks of a missing node": (
        "SELECT count(*) FROM node_blocks b WHERE NOT EXISTS "
        "(SELECT 1 FROM nodes n WHERE n.tenant = b.tenant "
        "AND n.session_id = b.session_id AND n.id = b.node_id)"
    ),
}


def sql(url: str, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    """Rows of one statement, read on a connection of its own with plain SQL."""
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sqlalchemy.text(statement), params)]
    finally:
        engine.dispose()


def check_no_dangling_references(url: str) -> None:
    found = {problem: sql(url, query)[0][0] for problem, query in DANGLING.items()}
    assert found == dict.fromkeys(DANGLING, 0)


def check_after_crash(url: str, acked: list[str]) -> list[str]:
    """The store holds exactly the first k planned appends, k = acknowledged or one more (the
    append in flight may have committed before its acknowledgement was printed)."""
    check_sqlite_file(url)
    check_no_dangling_references(url)
    with SessionStore(url) as store:
        stored = [node.id for node in store.load_session(CRASH_SESSION).all()]
        planned = [node.id for node in itertools.islice(planned_nodes(), len(stored) + 1)]
        assert acked == planned[: len(acked)]
        assert len(acked) <= len(stored) <= len(acked) + 1
        assert stored == planned[: len(stored)]
        assert store.head(CRASH_SESSION) == stored[-1]
        log = sql(
            url,
            "SELECT kind, node_id FROM records WHERE session_id = :s ORDER BY pk",
            s=CRASH_SESSION,
        )
        assert log == [("append", node_id) for node_id in stored]
        assert [n.id for n in store.load_path_nodes(CRASH_SESSION)] == [
            n.id for n in store.load_session(CRASH_SESSION).path_nodes(stored[-1])
        ]
    return stored


def test_a_killed_appender_loses_no_acknowledged_append(database_url: str, tmp_path: Path) -> None:
    SessionStore(database_url).close()  # migrate up front: the kill should land on appends
    acked: list[str] = []
    for round_ in range(3):
        with Child(APPENDER, database_url, stderr=tmp_path / f"stderr-{round_}") as child:
            target = 10 + 15 * round_

            def enough(lines: list[str], target: int = target) -> bool:
                return len(acknowledged(lines)) >= target

            child.wait_for(enough)
            child.kill()
            assert child.process.returncode == -signal.SIGKILL
            acked += acknowledged(child.lines)
        # The next writer (the next round's child) starts from what the last one committed.
        stored = check_after_crash(database_url, acked)
        acked = stored
    # And the store takes appends after the crashes, compare-and-set included.
    with SessionStore(database_url) as store:
        following = list(itertools.islice(planned_nodes(), len(acked) + 2))[len(acked) :]
        for node in following:
            store.append_node(CRASH_SESSION, node, expected_head=store.head(CRASH_SESSION))
        assert store.head(CRASH_SESSION) == following[-1].id
        assert store.load_session(CRASH_SESSION).size == len(acked) + 2
    check_no_dangling_references(database_url)


IMPORTER = """
import sys
from memstore import SessionStore

store = SessionStore(sys.argv[1])
print("started", flush=True)
report = store.import_jsonl(
    sys.argv[2],
    session_id="big",
    progress=lambda done, records: print("progress", records, flush=True),
)
print("imported", report.records, flush=True)
"""


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A 20 MB session file (about 75,000 records) and its number of records."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    return path, write_big_session(path, 20)


def imported_records(lines: list[str]) -> int:
    counts = [int(line.split()[1]) for line in lines if line.split()[0] in ("progress", "imported")]
    return max(counts, default=0)


def test_a_killed_import_leaves_the_session_absent_or_complete(
    database_url: str, tmp_path: Path, big_file: tuple[Path, int]
) -> None:
    source, records = big_file
    with SessionStore(database_url) as store:  # migrated, and with a session to keep intact
        store.import_jsonl(ROOT / "tests/fixtures/legacy-jsonl/branching.jsonl")
        bystander = tmp_path / "bystander.jsonl"
        store.export_jsonl("branching", bystander)
    with Child(IMPORTER, database_url, str(source), stderr=tmp_path / "stderr") as child:
        # Rows of the import are in the database (uncommitted) once a batch is reported.
        child.wait_for(lambda lines: imported_records(lines) >= records // 4)
        child.kill()
        finished = any(line.startswith("imported") for line in child.lines)
    check_sqlite_file(database_url)
    check_no_dangling_references(database_url)
    with SessionStore(database_url) as store:
        present = "big" in store.list_sessions()
        if present:  # the kill came after the commit: then all of it is there
            store.export_jsonl("big", tmp_path / "out.jsonl")
            assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()
        else:
            assert not finished
            for table in ("nodes", "node_blocks", "records"):
                query = f"SELECT count(*) FROM {table} WHERE session_id = 'big'"
                assert sql(database_url, query) == [(0,)]
        # The session that was there before is untouched.
        store.export_jsonl("branching", tmp_path / "branching.jsonl")
        assert (tmp_path / "branching.jsonl").read_bytes() == bystander.read_bytes()
        # Running the import again finishes it, exactly as an uninterrupted run would.
        report = store.import_jsonl(source, session_id="big")
        assert report.records == (0 if present else records)
        store.export_jsonl("big", tmp_path / "out.jsonl")
        assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()
    check_no_dangling_references(database_url)


# --- limits: one huge record, one very long session ---------------------------------------------
# tests/test_limits.py proves an 80 MB file of ordinary turns streams in bounded memory; these
# prove memory follows the largest record (a 50 MB image) and that 200,000 nodes stay workable.

RECORD_BYTES = 50_000_000
MEMORY_FACTOR = 7  # peak RSS growth over the record size; measured about 6 (docs/reliability.md)

MEASURE = """
import hashlib, re, sys
from pathlib import Path
from memstore import SessionStore

def peak():
    # VmHWM belongs to this program's memory map; ru_maxrss would carry over the parent's
    # peak through fork (a pytest process that holds big buffers would hide the growth).
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1])

store = SessionStore(sys.argv[1])
store.list_sessions()
before = peak()
operation, argument = sys.argv[2], sys.argv[3]
if operation == "import":
    result = store.import_jsonl(argument, session_id="image").records
elif operation == "load":
    (turn,) = store.load_path("image")
    result = hashlib.sha256(turn.to_json()["blocks"][1]["dataBase64"].encode()).hexdigest()
else:
    result = store.export_jsonl("image", argument)
after = peak()
store.close()
print((after - before) * 1024, result)
"""


def measure(url: str, operation: str, argument: str) -> tuple[float, str]:
    """Peak RSS growth (as a multiple of the record) of one operation in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, url, operation, argument],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    growth, result = done.stdout.split()
    return int(growth) / RECORD_BYTES, result


@pytest.fixture(scope="module")
def image_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A one-turn session whose image block holds 50 MB of base64; and that base64's sha256."""
    import base64
    import hashlib

    data = base64.b64encode(os.urandom(RECORD_BYTES * 3 // 4))
    turn_json = (
        b'{"role":"user","blocks":[{"kind":"text","text":"what is this?"},'
        b'{"kind":"image","mediaType":"image/png","dataBase64":"' + data + b'"}]}'
    )
    node_id = hash_node_text(None, turn_json, 1_767_225_600_000)
    path = tmp_path_factory.mktemp("image") / "image.jsonl"
    with path.open("wb") as out:
        out.write(b'{"type":"node","node":{"id":"' + node_id.encode() + b'","parent":null,"turn":')
        out.write(turn_json)
        out.write(b',"createdAt":1767225600000}}\n' + head_line(node_id).encode())
    return path, hashlib.sha256(data).hexdigest()


linux_only = pytest.mark.skipif(sys.platform != "linux", reason="reads peak RSS from /proc")


@linux_only
def test_a_50_mb_turn_imports_and_exports_in_memory_proportional_to_it(
    database_url: str, tmp_path: Path, image_file: tuple[Path, str]
) -> None:
    source, _ = image_file
    SessionStore(database_url).close()
    growth, records = measure(database_url, "import", str(source))
    assert records == "2"
    assert growth < MEMORY_FACTOR, f"import grew {growth:.1f}x the record"
    growth, _ = measure(database_url, "export", str(tmp_path / "out.jsonl"))
    assert growth < MEMORY_FACTOR, f"export grew {growth:.1f}x the record"
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@linux_only
def test_a_50_mb_turn_loads_in_memory_proportional_to_it(
    backend: str, request: pytest.FixtureRequest, image_file: tuple[Path, str]
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    source, digest = image_file
    with SessionStore(url) as store:
        store.import_jsonl(source, session_id="image")
    growth, loaded = measure(url, "load", "-")
    assert loaded == digest
    assert growth < MEMORY_FACTOR, f"load_path grew {growth:.1f}x the record"


def write_chain(path: Path, count: int) -> list[str]:
    """A linear session of `count` small turns; returns the node ids in order."""
    ids: list[str] = []
    parent: str | None = None
    with path.open("w", encoding="utf-8", newline="") as out:
        for n in range(count):
            role = "user" if n % 2 == 0 else "assistant"
            turn_json = jsjson.dumps({"role": role, "blocks": [{"kind": "text", "text": f"#{n}"}]})
            created_at = 1_767_225_600_000 + n
            node_id = hash_node_text(parent, turn_json.encode(), created_at)
            out.write(node_line(node_id, parent, turn_json, created_at) + head_line(node_id))
            ids.append(node_id)
            parent = node_id
    return ids


def test_a_session_of_200_000_nodes_imports_loads_and_exports(
    sqlite_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "long.jsonl"
    ids = write_chain(source, 200_000)
    with SessionStore(sqlite_url) as store:
        assert store.import_jsonl(source).records == 400_000
        assert store.head("long") == ids[-1]
        assert [node.id for node in store.load_path_nodes("long", last=50)] == ids[-50:]
        store.export_jsonl("long", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        "postgres",
    ],
)
def test_a_session_1000_nodes_deep_can_be_deleted(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    write_chain(tmp_path / "deep.jsonl", 1000)
    with SessionStore(url) as store:
        store.import_jsonl(tmp_path / "deep.jsonl")
        assert store.delete_session("deep") is True
        assert store.list_sessions() == []
