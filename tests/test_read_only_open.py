"""Opening for reading never writes: the read-only commands and `read_only=True` stores leave a
database that is missing, empty, someone else's, older or newer exactly as it was, and say in one
line what to do; a database in a read-only directory is read (issues 16 and 17)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy
from typer.testing import CliRunner

from memstore import (
    DatabaseTooNewError,
    ReadOnlyStoreError,
    SessionGraph,
    SessionStore,
    StoreNotReadyError,
)
from memstore.cli import app
from memstore.store.migrate import head_revision
from memstore.store.names import VERSION_TABLE

from .conftest import LEGACY

runner = CliRunner()
TURN = {"role": "user", "blocks": [{"kind": "text", "text": "hello reader"}]}

READ_COMMANDS = {
    "sessions": ["sessions"],
    "tree": ["tree", "s"],
    "show": ["show", "s"],
    "search": ["search", "hello"],
    "sql": ["sql", "SELECT 1"],
    "stats": ["stats"],
    "export": ["export", "s", "-o", "{out}/s.jsonl"],
    "export-all": ["export", "--all", "-o", "{out}"],
    "db-current": ["db", "current"],
}
WRITE_COMMANDS = {
    "import": ["import", str(LEGACY / "branching.jsonl")],
    "compact": ["compact", "s"],
    "demo": ["demo", "--workdir", "{out}/demo"],
    "db-upgrade": ["db", "upgrade"],
    "db-downgrade": ["db", "downgrade", "0011"],
}


def invoke(db: str, arguments: list[str], out: Path) -> tuple[int, list[str]]:
    """Run a command in-process; its exit code and every non-blank line it printed."""
    filled = [argument.format(out=out) for argument in arguments]
    result = runner.invoke(app, ["--db", db, *filled])
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return result.exit_code, lines


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file of a directory, by name, with its bytes (a -wal or -shm file shows up)."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


# --- SQLite databases in every state a reader may meet ----------------------------------------


def _missing(path: Path) -> None:
    del path


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _unrelated(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    connection.execute("INSERT INTO invoices (total) VALUES (12.5)")
    connection.commit()
    connection.close()


def _old_revision(path: Path) -> None:
    with SessionStore(f"sqlite:///{path}", auto_migrate=False) as store:
        store.upgrade_schema("0011")


STATES: dict[str, Callable[[Path], None]] = {
    "missing": _missing,
    "empty": _empty,
    "unrelated": _unrelated,
    "old revision": _old_revision,
}


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize("command", list(READ_COMMANDS))
def test_a_read_only_command_leaves_a_sqlite_file_that_is_not_ready_as_it_was(
    tmp_path: Path, state: str, command: str
) -> None:
    folder, out = tmp_path / "db", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    database = folder / "app.db"
    STATES[state](database)
    before = snapshot(folder)
    code, lines = invoke(f"sqlite:///{database}", READ_COMMANDS[command], out)
    assert code == 1, lines
    assert len(lines) == 1, lines
    assert "db upgrade`" in lines[0]
    assert "Traceback" not in lines[0]
    assert snapshot(folder) == before  # byte for byte, and no -wal, -shm or new file
    assert list(out.iterdir()) == []


def psycopg_url(url: str) -> str:
    return url.replace("postgresql:", "postgresql+psycopg:", 1)


@pytest.fixture
def postgres_states(postgres_url: str) -> Callable[[str], None]:
    """Puts the test's PostgreSQL schema in a state: empty, someone else's tables, old."""

    def make(state: str) -> None:
        if state == "unrelated":
            engine = sqlalchemy.create_engine(psycopg_url(postgres_url))
            with engine.begin() as connection:
                connection.exec_driver_sql("CREATE TABLE invoices (id serial, total real)")
                connection.exec_driver_sql("INSERT INTO invoices (total) VALUES (12.5)")
            engine.dispose()
        elif state == "old revision":
            with SessionStore(postgres_url, auto_migrate=False) as store:
                store.upgrade_schema("0011")

    return make


def postgres_contents(url: str) -> tuple[list[str], list[tuple[object, ...]]]:
    """The relations of the test's schema, and memstore's version rows if any."""
    engine = sqlalchemy.create_engine(psycopg_url(url))
    try:
        with engine.connect() as connection:
            names = connection.exec_driver_sql(
                "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
                "ORDER BY relname"
            )
            relations = [row[0] for row in names]
            versions: list[tuple[object, ...]] = []
            if VERSION_TABLE in relations:
                rows = connection.exec_driver_sql(f"SELECT * FROM {VERSION_TABLE}")
                versions = [tuple(row) for row in rows]
            return relations, versions
    finally:
        engine.dispose()


@pytest.mark.parametrize("state", ["empty", "unrelated", "old revision"])
def test_read_only_commands_leave_a_postgresql_schema_that_is_not_ready_as_it_was(
    postgres_url: str, postgres_states: Callable[[str], None], tmp_path: Path, state: str
) -> None:
    postgres_states(state)
    before = postgres_contents(postgres_url)
    for command, arguments in READ_COMMANDS.items():
        code, lines = invoke(postgres_url, arguments, tmp_path)
        assert code == 1, (command, lines)
        assert len(lines) == 1, (command, lines)
        assert "db upgrade`" in lines[0], (command, lines)
    assert postgres_contents(postgres_url) == before
    assert list(tmp_path.iterdir()) == []


def test_db_current_says_what_state_the_database_is_in(sqlite_url: str, tmp_path: Path) -> None:
    code, lines = invoke(sqlite_url, ["db", "current"], tmp_path)
    assert (code, len(lines)) == (1, 1)
    assert "there is no memstore database at" in lines[0]
    with SessionStore(sqlite_url, auto_migrate=False) as store:
        store.upgrade_schema("0011")
    code, lines = invoke(sqlite_url, ["db", "current"], tmp_path)
    assert (code, lines) == (
        1,
        [f"revision 0011: behind (newest is {head_revision()}): upgrade with `memstore --db "
         f"{sqlite_url} db upgrade`"],
    )  # fmt: skip
    assert invoke(sqlite_url, ["db", "upgrade"], tmp_path)[0] == 0
    assert invoke(sqlite_url, ["db", "current"], tmp_path) == (
        0,
        [f"revision {head_revision()}: up to date"],
    )


# --- a database a newer memstore migrated (issue 16, item 9) -----------------------------------


def _make_newer(url: str) -> None:
    with SessionStore(url) as store:
        store.append_node("s", SessionGraph("s").append(TURN))
        with store.engine.begin() as connection:
            connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '9f00future'")


@pytest.mark.parametrize("command", [*READ_COMMANDS, *WRITE_COMMANDS])
def test_every_command_on_a_newer_database_is_one_line_naming_the_package(
    database_url: str, tmp_path: Path, command: str
) -> None:
    _make_newer(database_url)
    arguments = {**READ_COMMANDS, **WRITE_COMMANDS}[command]
    code, lines = invoke(database_url, arguments, tmp_path)
    assert code == 1, lines
    assert len(lines) == 1, lines
    assert "newer than this memstore" in lines[0]
    assert "'9f00future'" in lines[0]
    assert "pip install --upgrade memstore-sql" in lines[0]
    with SessionStore(database_url, auto_migrate=False) as store:
        assert store.schema_revision() == "9f00future"  # nothing was migrated or imported
        assert store.load_session("s").size == 1


def test_the_api_refuses_a_newer_database_with_a_memstore_error(
    open_store: Callable[..., SessionStore], database_url: str
) -> None:
    _make_newer(database_url)
    for read_only in (False, True):
        with pytest.raises(DatabaseTooNewError, match="newer than this memstore"):
            open_store(read_only=read_only)


def test_db_current_says_a_newer_database_is_newer(sqlite_url: str, tmp_path: Path) -> None:
    _make_newer(sqlite_url)
    code, stdout = invoke(sqlite_url, ["db", "current", "--json"], tmp_path)
    assert code == 1
    assert json.loads("\n".join(stdout))["state"] == "newer"
    code, lines = invoke(sqlite_url, ["db", "current"], tmp_path)
    assert "behind" not in lines[0]
    assert "is newer than this memstore" in lines[0]


# --- read-only stores -------------------------------------------------------------------------


def test_a_read_only_store_reads_and_refuses_every_write(
    open_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    writer = open_store()
    node = SessionGraph("s").append(TURN)
    writer.append_node("s", node)
    reader = open_store(read_only=True)
    assert reader.read_only
    assert reader.head("s") == node.id
    assert [hit.node_id for hit in reader.search("reader")] == [node.id]
    assert reader.export_jsonl("s", tmp_path / "s.jsonl") == 2
    second = reader.load_session("s").append(TURN)
    with pytest.raises(ReadOnlyStoreError, match="opened read-only"):
        reader.append_node("s", second)
    with pytest.raises(ReadOnlyStoreError):
        reader.import_jsonl(LEGACY / "branching.jsonl")
    with pytest.raises(ReadOnlyStoreError):
        reader.delete_session("s")
    assert writer.list_sessions() == ["s"]
    assert writer.head("s") == node.id


def test_a_read_only_store_on_a_database_without_memstore_says_what_to_run(
    open_store: Callable[..., SessionStore], database_url: str
) -> None:
    with pytest.raises(StoreNotReadyError, match="db upgrade`"):
        open_store(read_only=True)
    if database_url.startswith("sqlite"):
        assert not Path(database_url.removeprefix("sqlite:///")).exists()


def test_the_read_only_postgresql_connection_refuses_writes_itself(postgres_url: str) -> None:
    with SessionStore(postgres_url):
        pass
    with (
        SessionStore(postgres_url, read_only=True) as reader,
        reader.engine.connect() as c,
        pytest.raises(sqlalchemy.exc.InternalError, match="read-only transaction"),
    ):
        c.exec_driver_sql("DELETE FROM sessions")


# --- a read-only directory (issue 16, item 10) ------------------------------------------------


@contextlib.contextmanager
def read_only_directory(folder: Path) -> Iterator[None]:
    """Make a directory unwritable even for root (chattr +i) or, for others, by its mode."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)], check=False).returncode:
        pytest.skip("running as root without chattr +i: a directory cannot be made read-only")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)


@pytest.mark.parametrize("writer_open", [False, True])
def test_reading_works_in_a_read_only_directory(tmp_path: Path, writer_open: bool) -> None:
    folder, out = tmp_path / "ro", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    url = f"sqlite:///{folder / 'memstore.db'}"
    node = SessionGraph("s").append(TURN)
    writer = SessionStore(url)
    writer.append_node("s", node)
    if not writer_open:  # the last connection gone: no -wal or -shm file is left
        writer.close()
    try:
        with read_only_directory(folder):
            before = snapshot(folder)
            assert os.access(folder, os.W_OK) is False
            code, lines = invoke(url, ["sessions", "--json"], out)
            assert code == 0, lines
            assert [item["sessionId"] for item in json.loads("\n".join(lines))] == ["s"]
            for arguments in (["show", "s"], ["search", "reader"], ["stats"], ["tree", "s"]):
                code, lines = invoke(url, arguments, out)
                assert code == 0, (arguments, lines)
            code, lines = invoke(url, ["sql", "SELECT count(*) AS n FROM nodes", "--json"], out)
            assert (code, json.loads("\n".join(lines))) == (0, [{"n": 1}])
            assert invoke(url, ["export", "s", "-o", str(out / "s.jsonl")], out)[0] == 0
            with SessionStore(url, read_only=True) as reader:
                assert reader.load_path("s")[0].role == "user"
            assert asyncio.run(_async_head(url)) == node.id
            assert snapshot(folder).keys() == before.keys()
    finally:
        writer.close()
    assert (out / "s.jsonl").read_text().count("\n") == 2


async def _async_head(url: str) -> str | None:
    from memstore import AsyncSessionStore

    async with AsyncSessionStore(url, read_only=True) as store:
        return await store.head("s")
