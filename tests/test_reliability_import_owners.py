"""No session is hidden forever by an import mark (SQLite imports that commit as they go): whether
the importer lives is asked of the kernel (the lock its import holds), not of the process table;
a mark from another host or PID namespace, or a damaged one, is judged by that lock alone; a
full disk does not stop a store from opening; and an importer that cannot be reached can be
taken over (`clean_abandoned_imports(force=...)`, `memstore db clean-imports --force`).
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from memstore import SessionImportingError, SessionStore
from memstore.errors import InvalidArgumentError
from memstore.store import create_store_engine

from .test_limits import write_big_session
from .test_reliability_crash import IMPORTER, Child, imported_records, sql, sqlite_file

pytestmark = pytest.mark.slow  # imports killed and raced in other processes

ROOT = Path(__file__).resolve().parent.parent
SESSION = "big"
HOST = socket.gethostname()
TOKEN = "0123456789abcdef"
MEMSTORE = [sys.executable, "-m", "memstore"]
SHORT_CHUNKS = "from memstore.store import importing\nimporting.CHUNK_SECONDS = 0.05\n"
LOCK_HOLDER = """
import sys, time
from memstore.store.import_locks import hold

assert hold(sys.argv[2], sys.argv[1])
print("holding", flush=True)
time.sleep(600)
"""


def turn(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def mark(url: str, marker: str) -> None:
    """Give session `big` (three turns) the import mark `marker`: a partial import."""
    with SessionStore(url) as store:
        for n in range(3):
            store.append(SESSION, turn(f"partial {n}"))
        store.append("other", turn("bystander"))
    write(url, "UPDATE sessions SET importing = :m WHERE id = :s", m=marker, s=SESSION)


def write(url: str, statement: str, **params: Any) -> None:
    """Run one statement and commit it, on a connection of its own."""
    engine = create_store_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text(statement), params)
    finally:
        engine.dispose()


def marker(**fields: Any) -> str:
    """A mark as memstore wrote them before its imports held a lock (this host by default)."""
    mark = {"host": HOST, "pid": 1234, "started": "1", "token": TOKEN, **fields}
    return json.dumps(mark, sort_keys=True)


def session_rows(url: str) -> int:
    query = "SELECT (SELECT count(*) FROM nodes WHERE session_id = :s) + "
    query += "(SELECT count(*) FROM sessions WHERE id = :s)"
    return int(sql(url, query, s=SESSION)[0][0])


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[Callable[[str, str], Child]]:
    """Starts a child process that holds the import lock of a token on a database file."""
    children: list[Child] = []

    def start(url: str, token: str) -> Child:
        database = sqlite_file(url)
        assert database is not None
        child = Child(LOCK_HOLDER, database, token, stderr=tmp_path / f"holder{len(children)}")
        children.append(child)
        child.wait_for(lambda lines: "holding" in lines, timeout=60)
        return child

    yield start
    for child in children:
        child.kill()
        child.__exit__(None, None, None)


def test_a_mark_from_another_host_whose_import_holds_no_lock_is_cleaned_on_open(
    sqlite_url: str,
) -> None:
    """A container that restarted with a new hostname, or a file moved to another machine."""
    mark(sqlite_url, marker(host="old-container-4f2a"))
    with SessionStore(sqlite_url) as store:
        assert session_rows(sqlite_url) == 0
        store.append(SESSION, turn("written again"))
        assert store.load_session(SESSION).size == 1


def test_a_held_lock_keeps_an_import_alive_whatever_host_and_pid_its_mark_names(
    sqlite_url: str, lock_holder: Callable[[str, str], Child]
) -> None:
    """Another PID namespace on this host (containers sharing the host's network): the mark's
    pid names no process here, but the importer's lock is held."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid names no process now
    mark(sqlite_url, marker(pid=gone.pid))
    lock_holder(sqlite_url, TOKEN)
    with SessionStore(sqlite_url) as store:
        assert store.clean_abandoned_imports() == []
        assert session_rows(sqlite_url) == 4
        with pytest.raises(SessionImportingError) as refused:
            store.append(SESSION, turn("sneak"))
    assert f"process {gone.pid} on " in str(refused.value)
    assert f"memstore db clean-imports --force {SESSION}" in str(refused.value)


class NamespacedChild(Child):
    """A `Child` started through `prefix` (such as `unshare ...`)."""

    def __init__(self, prefix: list[str], script: str, *args: str, tmp_path: Path) -> None:
        self._stderr_path = tmp_path / "stderr"
        self._stderr = self._stderr_path.open("wb")
        command = [*prefix, sys.executable, "-c", script, *args]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self.lines: list[str] = []
        self._pending = b""


def test_an_import_in_another_pid_namespace_is_not_deleted_under_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A real import in a PID namespace of its own (as pid 1 there): a store opened for writing
    meanwhile leaves it be, and it completes."""
    unshare = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    if shutil.which("unshare") is None or subprocess.run([*unshare, "true"]).returncode != 0:
        pytest.skip("no PID namespace can be made here (unshare)")
    source = tmp_path / "five.jsonl"
    records = write_big_session(source, 5)
    SessionStore(sqlite_url).close()
    with NamespacedChild(
        unshare, SHORT_CHUNKS + IMPORTER, sqlite_url, str(source), tmp_path=tmp_path
    ) as child:
        child.wait_for(lambda lines: imported_records(lines) >= records // 4)
        marked = sql(sqlite_url, "SELECT importing FROM sessions WHERE id = :s", s=SESSION)
        assert json.loads(marked[0][0])["pid"] < 10  # its own namespace's pid
        with SessionStore(sqlite_url) as store:
            assert store.clean_abandoned_imports() == []
        child.wait_for(lambda lines: any(line.startswith("imported") for line in lines))
    with SessionStore(sqlite_url) as store:
        store.export_jsonl(SESSION, tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()


MALFORMED = {
    "pid not a number": marker(pid="abc"),
    "pid too big for the kernel": marker(pid=99999999999999),
    "pid -1": marker(pid=-1),
    "pid 0": marker(pid=0),
    "an extra key": marker(extra="x"),
    "no token": json.dumps({"host": HOST, "pid": 1234, "started": "1"}),
    "a token that is not one": marker(token="not hex"),
    "not an object": "[1, 2]",
    "not JSON": "another process",
}


@pytest.mark.parametrize("damage", MALFORMED)
def test_a_malformed_mark_neither_raises_nor_hides_the_session(
    sqlite_url: str, tmp_path: Path, damage: str
) -> None:
    mark(sqlite_url, MALFORMED[damage])
    source = ROOT / "tests/fixtures/legacy-jsonl/branching.jsonl"
    done = subprocess.run(
        [*MEMSTORE, "--db", sqlite_url, "import", str(source)], capture_output=True, text=True
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert session_rows(sqlite_url) == 0
    with SessionStore(sqlite_url) as store:
        assert SESSION not in store.list_sessions()
        store.append(SESSION, turn("written again"))


def test_a_malformed_mark_is_named_as_such_when_a_write_is_refused(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        mark(sqlite_url, "another process")
        with pytest.raises(SessionImportingError, match="whose mark memstore cannot read"):
            store.append(SESSION, turn("sneak"))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_import_that_cannot_be_reached_is_taken_over_by_force(
    sqlite_url: str, lock_holder: Callable[[str, str], Child], flavour: str
) -> None:
    mark(sqlite_url, marker(host="far-away"))
    lock_holder(sqlite_url, TOKEN)  # a hung importer: its lock stays held
    with SessionStore(sqlite_url) as store:
        assert store.clean_abandoned_imports() == []
        with pytest.raises(InvalidArgumentError, match="'other' is not being imported"):
            store.clean_abandoned_imports(force=["other"])
        with pytest.raises(InvalidArgumentError, match="a list of session ids"):
            store.clean_abandoned_imports(force=SESSION)
        assert session_rows(sqlite_url) == 4
        if flavour == "sync":
            assert store.clean_abandoned_imports(force=[SESSION]) == [SESSION]
        else:
            assert asyncio_force(sqlite_url, SESSION) == [SESSION]
        assert session_rows(sqlite_url) == 0
        assert store.list_sessions() == ["other"]


def asyncio_force(url: str, session_id: str) -> list[str]:
    import asyncio

    from memstore.store.aio import AsyncSessionStore

    async def force() -> list[str]:
        async with AsyncSessionStore(url) as store:
            return await store.clean_abandoned_imports(force=[session_id])

    return asyncio.run(force())


def test_the_take_over_works_on_postgresql_too(postgres_url: str) -> None:
    """PostgreSQL never marks (its imports are one transaction), but a mark is taken over."""
    mark(postgres_url, marker())
    with SessionStore(postgres_url) as store:
        assert store.list_sessions() == ["other"]
        assert store.clean_abandoned_imports(force=[SESSION]) == [SESSION]
        assert session_rows(postgres_url) == 0


def test_the_command_line_takes_an_import_over_by_force(
    sqlite_url: str, lock_holder: Callable[[str, str], Child]
) -> None:
    mark(sqlite_url, marker(host="far-away"))
    lock_holder(sqlite_url, TOKEN)

    def clean(*args: str) -> subprocess.CompletedProcess[str]:
        command = [*MEMSTORE, "--db", sqlite_url, "db", "clean-imports", *args]
        return subprocess.run(command, capture_output=True, text=True)

    left = clean()
    assert (left.returncode, left.stdout, left.stderr) == (0, "no abandoned imports\n", "")
    wrong = clean("--force", "other")
    assert wrong.returncode == 2  # an argument the library refuses, as for other commands
    assert wrong.stderr == (
        "error: session 'other' is not being imported: there is no import to take over\n"
    )
    forced = clean("--force", SESSION)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout == f"deleted the partial import of session '{SESSION}'\n"
    assert session_rows(sqlite_url) == 0


def free_only(directory: Path, free: int) -> None:
    """Fill the file system of `directory` (a small tmpfs) but for `free` bytes."""
    filler = directory / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * (1 << 16))
                out.flush()
        except OSError:
            pass
    filler.unlink()
    with filler.open("wb") as out:  # free space, less `free`, as one file
        out.write(b"\0" * (shutil.disk_usage(directory).free - free))


def open_on_a_full_disk(directory: str, source: str) -> None:
    """In a mount namespace, with `directory` a small tmpfs: a session whose import died fills
    the disk, then stores are opened; prints what happened as JSON (see the test below)."""
    url = f"sqlite:///{directory}/memstore.db"
    with SessionStore(url) as store:
        store.import_jsonl(source, session_id=SESSION)
        store.append("other", turn("bystander"))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its import died with it
    write(
        url, "UPDATE sessions SET importing = :m WHERE id = :s", m=marker(pid=gone.pid), s=SESSION
    )
    warnings: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("memstore").addHandler(handler)
    free_only(Path(directory), 400_000)
    seen: dict[str, Any] = {}
    with SessionStore(url) as store:
        seen["full"] = {
            "warnings": list(warnings),
            "sessions": store.list_sessions(),
            "other": store.load_session("other").size,
        }
        store.append("other", turn("written on a full disk"))
        seen["full"]["other after an append"] = store.load_session("other").size
    seen["full"]["rows"] = session_rows(url)
    (Path(directory) / "filler").unlink()
    warnings.clear()
    with SessionStore(url) as store:
        seen["freed"] = {"warnings": warnings, "sessions": store.list_sessions()}
    seen["freed"]["rows"] = session_rows(url)
    print(json.dumps(seen), flush=True)


def test_a_full_disk_does_not_stop_a_store_from_opening(tmp_path: Path) -> None:
    """Deleting a dead import's 3 MB fails on a disk with 400 kB free: the store opens all the
    same, saying so once; reads and a small append work; the import stays hidden, and the next
    store opened once space is freed deletes it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    source = tmp_path / "three.jsonl"
    write_big_session(source, 3)
    mount = f'mount -t tmpfs -o size=24m tmpfs {disk} && exec "$@"'
    script = "import sys\nfrom tests.test_reliability_import_owners import open_on_a_full_disk\n"
    script += "open_on_a_full_disk(sys.argv[1], sys.argv[2])"
    command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount, "sh"]
    if shutil.which("unshare") is None or subprocess.run([*command, "true"]).returncode != 0:
        pytest.skip("no small file system can be mounted here (unshare, tmpfs)")
    command += [sys.executable, "-c", script, str(disk), str(source)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    full, freed = seen["full"], seen["freed"]
    assert len(full["warnings"]) == 1, full["warnings"]
    assert "deleting the partial imports of 1 session(s) ('big') failed" in full["warnings"][0]
    assert "database or disk is full" in full["warnings"][0]
    assert "they stay hidden" in full["warnings"][0]
    assert full["sessions"] == ["other"]
    assert (full["other"], full["other after an append"]) == (1, 2)
    assert full["rows"] > 0
    assert freed == {"warnings": [], "sessions": ["other"], "rows": 0}
