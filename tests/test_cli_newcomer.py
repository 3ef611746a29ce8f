"""The command line as a new user meets it (issue 18): each case runs in a real process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memstore.terminal import format_time

from .conftest import LEGACY, LEGACY_FILES
from .legacy import read_legacy_session

pytestmark = pytest.mark.slow  # each test runs memstore in processes of its own


def memstore(db: str, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """Run `memstore --db DB ARGS...` in a fresh process, its output piped (not a terminal)."""
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "memstore.cli", "--db", db, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def flat(text: str) -> str:
    """Text without the frame Click draws around a usage error, one space between words."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", text).split())


def session_ids(db: str) -> list[str]:
    done = memstore(db, "sessions", "--json")
    assert done.returncode == 0, done.stderr
    return [item["sessionId"] for item in json.loads(done.stdout)]


# --- import ---------------------------------------------------------------------------------------


def test_one_session_for_several_files_is_refused_before_anything_is_imported(
    sqlite_url: str, tmp_path: Path
) -> None:
    empty = tmp_path / "b.jsonl"
    empty.write_text("")
    done = memstore(
        sqlite_url, "import", str(LEGACY / "branching.jsonl"), str(empty), "--session", "both"
    )
    assert done.returncode == 2
    assert "--session" in done.stderr
    assert "2 paths were given" in flat(done.stderr)
    assert "Traceback" not in done.stderr
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # not even the database


def test_one_session_for_a_directory_is_refused_the_same_way(sqlite_url: str) -> None:
    done = memstore(sqlite_url, "import", str(LEGACY), "--session", "all")
    assert done.returncode == 2
    assert "is a directory given" in flat(done.stderr)


def test_a_directory_without_jsonl_files_is_one_error_line(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a session\n")
    done = memstore(sqlite_url, "import", str(tmp_path))
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line == f"error: {tmp_path}: no .jsonl files in this directory: nothing to import"


def test_when_every_file_fails_no_empty_table_is_printed(sqlite_url: str, tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text("{nope\n")
    done = memstore(sqlite_url, "import", str(tmp_path))
    assert done.returncode == 1
    assert done.stdout == ""
    assert [line.split(":")[0] for line in done.stderr.splitlines()] == ["error", "error"]


def test_a_torn_last_line_is_warned_about_once(sqlite_url: str, tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    lines = (LEGACY / "branching.jsonl").read_bytes().splitlines(keepends=True)
    torn.write_bytes(b"".join(lines[:10]) + lines[10][:25])
    done = memstore(sqlite_url, "import", str(torn))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("the last line is torn") == 1
    assert done.stderr.startswith(f"warning: {torn}:11: the last line is torn")
    assert "1 warning" in done.stdout


def test_import_and_stats_count_the_same_lines(database_url: str) -> None:
    done = memstore(database_url, "import", "--json", str(LEGACY))
    assert done.returncode == 0, done.stderr
    imported = sum(item["records"] for item in json.loads(done.stdout)["files"])
    assert imported == sum(len(path.read_bytes().splitlines()) for path in LEGACY_FILES)
    done = memstore(database_url, "stats", "--json")
    assert json.loads(done.stdout)["records"] == imported
    assert f"{imported} lines of JSONL" in memstore(database_url, "stats").stdout
    assert "lines" in memstore(database_url, "import", str(LEGACY / "unicode.jsonl")).stdout


# --- export, tables, limits -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database holding every legacy file, which the tests below only read."""
    db = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'cli.db'}"
    done = memstore(db, "import", str(LEGACY))
    assert done.returncode == 0, done.stderr
    return db


@pytest.fixture
def large(tmp_path: Path) -> str:
    """A database of its own holding the 2,904-turn legacy session, to compact."""
    db = f"sqlite:///{tmp_path / 'large.db'}"
    done = memstore(db, "import", str(LEGACY / "large-session.jsonl"))
    assert done.returncode == 0, done.stderr
    return db


def test_sessions_are_as_old_as_their_turns_not_their_import(imported: str) -> None:
    listed = json.loads(memstore(imported, "sessions", "--json").stdout)
    for item in listed:
        times = [
            node.created_at
            for node in read_legacy_session(LEGACY / f"{item['sessionId']}.jsonl").all()
        ]
        if times:
            assert (item["createdAt"], item["updatedAt"]) == (min(times), max(times))
    updated = [item["updatedAt"] for item in listed]
    assert updated == sorted(updated, reverse=True)
    assert len(set(updated)) > 1  # not one import time for all


def test_export_takes_the_format_from_the_extension(imported: str, tmp_path: Path) -> None:
    for name in ("page.html", "page.HTM", "notes.md", "copy.jsonl", "copy.txt"):
        done = memstore(imported, "export", "branching", "-o", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "page.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert (tmp_path / "page.HTM").read_text() == (tmp_path / "page.html").read_text()
    assert (tmp_path / "notes.md").read_text().startswith("#")
    original = (LEGACY / "branching.jsonl").read_bytes()
    assert (tmp_path / "copy.jsonl").read_bytes() == original
    assert (tmp_path / "copy.txt").read_bytes() == original
    done = memstore(
        imported, "export", "branching", "--format", "jsonl", "-o", str(tmp_path / "x.html")
    )
    assert (tmp_path / "x.html").read_bytes() == original


@pytest.mark.parametrize("columns", [80, 200])
def test_tables_show_numbers_and_ids_whole(imported: str, columns: int) -> None:
    query = (
        "SELECT created_at, node_id, session_id, 'a few words of text to wrap' AS note "
        "FROM turns WHERE session_id = 'branching' ORDER BY seq LIMIT 3"
    )
    done = memstore(imported, "sql", query, "--json")
    rows = json.loads(done.stdout)
    done = memstore(imported, "sql", query, columns=columns)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    for row in rows:
        assert str(row["created_at"]) in done.stdout
        assert row["node_id"] in done.stdout
    listing = memstore(imported, "sessions", columns=columns).stdout
    assert "…" not in listing
    for item in json.loads(memstore(imported, "sessions", "--json").stdout):
        assert item["sessionId"] in listing
        assert format_time(item["updatedAt"]) in listing  # not wrapped at its space
        assert f" {item['head'][:8]} " in listing  # the shortest prefix unique in its session
    assert ("branches" in listing) == (columns == 200)  # the first spare column, left out at 80


def test_tables_fold_rather_than_cut_when_ids_cannot_fit(imported: str) -> None:
    done = memstore(imported, "sql", "SELECT node_id, created_at FROM turns LIMIT 2", columns=30)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "--limit", "-1"],
        ["show", "branching", "--last", "-3"],
        ["search", "x", "--limit", "-1"],
    ],
)
def test_negative_counts_are_refused_alike(imported: str, args: list[str]) -> None:
    done = memstore(imported, *args)
    assert done.returncode == 2
    option = args[-2]
    assert f"Invalid value for '{option}'" in flat(done.stderr)


# --- compact --------------------------------------------------------------------------------------


def test_a_window_too_small_for_the_request_is_refused(large: str) -> None:
    done = memstore(large, "compact", "large-session", "--window", "10")
    assert done.returncode == 2
    assert "--window 10 cannot hold the summarizing request" in flat(done.stderr)
    assert "give --window 273 or more" in flat(done.stderr)
    show = memstore(large, "show", "large-session", "--last", "1", "--json")
    assert json.loads(show.stdout)[0]["id"] == "0ba4d965ed6b683279ad378318db02b1"


def test_a_chunked_compaction_counts_every_call_and_warns_when_it_still_overflows(
    large: str,
) -> None:
    # The session holds lone surrogates: both outputs write them as escapes, whole.
    path = json.loads(memstore(large, "show", "large-session", "--json").stdout)
    assert len(path) == 2904
    text = memstore(large, "show", "large-session")
    assert text.returncode == 0, text.stderr[-500:]
    assert "\\ud800" in text.stdout
    done = memstore(
        large, "compact", "large-session", "--window", "2000", "--keep-recent", "300", "--json"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "more than the window of 2000" in done.stderr
    condensed = path[: result["condensedTurns"]]
    calls = sum(b["kind"] == "tool_call" for node in condensed for b in node["turn"]["blocks"])
    summary = json.loads(memstore(large, "show", "large-session", "--json").stdout)[0]
    text = summary["turn"]["blocks"][0]["text"]
    assert text.count("[condensed earlier context]") == 1
    assert text.count("First request:") == 1
    assert f"Tool calls ({calls}): " in text
    assert summary["turn"]["memstore"]["condensed"]["fromNodeId"] == path[-1]["id"]


def test_compacting_an_empty_session_says_it_is_empty(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    assert memstore(sqlite_url, "import", str(tmp_path / "empty.jsonl")).returncode == 0
    done = memstore(sqlite_url, "compact", "empty")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "empty is empty: nothing to condense"
    done = memstore(sqlite_url, "import", str(LEGACY / "branching.jsonl"))
    done = memstore(sqlite_url, "compact", "branching", "--keep-recent", "50")
    assert "nothing to condense: all 12 turns of the head's path are kept" in done.stdout


# --- delete (issue 27 item 14) ----------------------------------------------------------------


def two_sessions(db: str) -> None:
    for name in ("a", "b"):
        done = memstore(db, "import", str(LEGACY / "linear-chat.jsonl"), "--session", name)
        assert done.returncode == 0, done.stderr


def test_delete_without_a_terminal_refuses_unless_yes(sqlite_url: str) -> None:
    two_sessions(sqlite_url)
    done = subprocess.run(
        [sys.executable, "-m", "memstore.cli", "--db", sqlite_url, "delete", "a"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "Nothing was deleted: pass --yes to confirm." in flat(done.stderr)
    assert sorted(session_ids(sqlite_url)) == ["a", "b"]
    done = memstore(sqlite_url, "delete", "a", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "deleted a\n"
    assert session_ids(sqlite_url) == ["b"]


def test_delete_of_a_missing_session_deletes_nothing(sqlite_url: str) -> None:
    two_sessions(sqlite_url)
    done = memstore(sqlite_url, "delete", "a", "nope", "--yes")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "nope" in line
    assert sorted(session_ids(sqlite_url)) == ["a", "b"]


# --- errors are one line (issue 27 item 15) ---------------------------------------------------


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command printed on stderr (exit status 1)."""
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("workdir", ["/proc/nope", "/etc/passwd"])
def test_demo_with_an_unusable_workdir_is_one_line_before_anything_is_written(
    sqlite_url: str, workdir: str
) -> None:
    done = memstore(sqlite_url, "demo", "--workdir", workdir)
    line = error_line(done)
    assert line.startswith(f"error: --workdir {workdir}: ")
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()


def test_output_to_a_full_disk_is_one_line(sqlite_url: str) -> None:
    two_sessions(sqlite_url)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "memstore.cli", "--db", sqlite_url, "sessions", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    line = error_line(done)
    assert line.startswith("error: [Errno 28] No space left on device")


def test_compact_with_a_model_invoker_without_the_models_extra_is_one_line(
    sqlite_url: str,
) -> None:
    two_sessions(sqlite_url)
    without_httpx = "import sys; sys.modules['httpx'] = None; from memstore.cli import main; main()"
    command = ["--db", sqlite_url, "compact", "a", "--invoker", "openai", "--model", "m"]
    done = subprocess.run(
        [sys.executable, "-c", without_httpx, *command],
        capture_output=True,
        text=True,
        check=False,
    )
    line = error_line(done)
    assert line.startswith("error: memstore.invokers.openai_compatible needs the 'models' extra")


# --- demo on PostgreSQL (issue 27 item 16) -----------------------------------------------------


def test_demo_on_postgresql_with_a_superuser_login_skips_the_sql_step_in_one_line(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTORE_READ_URL")  # the test server's own login: a superuser
    done = memstore(postgres_url, "demo", "--workdir", str(tmp_path / "demo"), columns=200)
    assert done.returncode == 0, done.stderr
    (skipped,) = [line for line in done.stdout.splitlines() if line.startswith("sql: skipped:")]
    assert "--read-url" in skipped
    assert "byte-identical to the original: True" in done.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--window", "100"], "--window 100 cannot hold the summarizing request and its reply: "),
        (["--window", "300", "--max-output", "100"], "with --max-output 100: give --window 305"),
        (["--invoker", "openai"], "api.openai.com needs an API key: set OPENAI_API_KEY"),
        (["--invoker", "anthropic"], "api.anthropic.com needs an API key: set ANTHROPIC_API_KEY"),
        (["--invoker", "openai", "--base-url", "ftp://x"], "URL; pass --base-url or set"),
    ],
)
def test_compact_refusals_name_the_options(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """They named the library's arguments (`pass api_key=...`, which the command has not) and
    no option for a window too small."""
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    two_sessions(sqlite_url)
    done = memstore(sqlite_url, "compact", "a", *args)
    assert done.returncode in (1, 2)
    assert said in flat(done.stderr)
    assert "=..." not in done.stderr


def test_compacting_twice_says_there_is_only_the_summary(sqlite_url: str) -> None:
    two_sessions(sqlite_url)
    first = memstore(sqlite_url, "compact", "a", "--keep-recent", "2")
    assert "condensed" in flat(first.stdout)
    again = memstore(sqlite_url, "compact", "a", "--keep-recent", "2")
    assert again.returncode == 0
    assert "nothing to condense: the head's path is an earlier summary" in flat(again.stdout)
