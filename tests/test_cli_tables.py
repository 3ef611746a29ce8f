"""Reading the command line's tables at 80 columns: whole headers, readable snippets, one line
per title (issue 27 item 21)."""

from __future__ import annotations

import json

from rich.console import Console
from typer.testing import CliRunner

from memstore import SessionStore
from memstore.cli import app
from memstore.cli.sessions import SQL_TABLE_ROWS
from memstore.terminal import data_table

WORDS = "the migration drops the snapshot later and the clock double counts every leaked row"
"""A turn's text long enough that a search snippet is cut from it."""


def run(url: str, *args: str, columns: int = 80) -> list[str]:
    result = CliRunner().invoke(app, ["--db", url, *args], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), result.stdout
    return lines


def drawn(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


def test_sql_headers_stay_whole_however_many_columns_a_query_has(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        store.append("a-session", {"role": "user", "blocks": [{"kind": "text", "text": WORDS}]})
    names = ["session_id", "description_of_the_turn", "another_long_column_name", "created_at"]
    query = (
        "SELECT session_id, text AS description_of_the_turn, 1 AS another_long_column_name,"
        " created_at FROM turns"
    )
    for selected in (query, query.replace("created_at", "created_at, 2 AS yet_another_column")):
        lines = run(sqlite_url, "sql", selected)
        words = {word for line in lines for word in line.replace("┃", " ").split()}
        for name in names:
            assert name in words, (name, lines)
        assert any("a-session" in line for line in lines)
    lines = run(sqlite_url, "sql", "SELECT * FROM session_stats")  # 13 columns: a row per block
    assert any(line.startswith("failed_tool_calls ") for line in lines), lines
    assert any(line.startswith("assistant_turns ") for line in lines), lines


def test_a_few_columns_stay_a_table_with_whole_headers() -> None:
    headers = ("session_id", "node_id", "assistant_turns")
    rows = [("large-session", "line-1019", "453")]
    lines = drawn(data_table(headers, rows, copyable=(True, True, True), width=80), 80)
    assert lines[0].split() == ["session_id", "┃", "node_id", "┃", "assistant_turns"]
    assert lines[2].split() == ["large-session", "│", "line-1019", "│", "453"]


def test_a_text_column_keeps_its_header_whole_beside_copyable_columns() -> None:
    headers = ("id", "a_rather_long_description")
    rows = [("x" * 40, "words " * 20)]
    lines = drawn(data_table(headers, rows, copyable=(True, False), width=80), 80)
    assert "a_rather_long_description" in lines[0]
    assert "x" * 40 in lines[2]


def test_a_search_snippet_reads_as_a_phrase_at_80_columns(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        for n in range(3):
            text = f"{WORDS} {n}  with\t\ttabs and\n\nnewlines {WORDS}"
            store.append(
                f"session-{n}", {"role": "user", "blocks": [{"kind": "text", "text": text}]}
            )
    lines = run(sqlite_url, "search", "snapshot")
    snippets = [line.strip() for line in lines if "[snapshot]" in line]
    assert len(snippets) == 3, lines
    assert all(len(snippet) >= 40 for snippet in snippets), snippets
    assert all("  " not in snippet and "\t" not in snippet for snippet in snippets)
    ids = [line for line in lines if line.startswith("session-")]
    assert len(ids) == 3
    assert all("user" in line and "20" in line for line in ids)  # role and time beside the ids


def test_a_wide_terminal_shows_search_hits_as_a_table(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": WORDS}]})
    lines = run(sqlite_url, "search", "snapshot", columns=140)
    assert lines[0].split("┃")[-1].strip() == "snippet"
    assert "[snapshot]" in lines[2]


def test_a_session_with_a_long_id_and_title_still_reads_at_80_columns(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        store.append("s" * 60, {"role": "user", "blocks": [{"kind": "text", "text": WORDS}]})
        store.update_session("s" * 60, title=WORDS * 5)
    lines = run(sqlite_url, "sessions")
    assert any(line.split()[:2] == ["session", "s" * 60] for line in lines), lines
    assert sum("the migration drops" in line for line in lines) == 1  # the title: one line
    assert any(line.endswith("…") for line in lines)


COUNT_TO = (
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {}) SELECT x FROM n"
)


def test_sql_draws_a_big_answer_as_a_capped_table_and_points_to_json(sqlite_url: str) -> None:
    SessionStore(sqlite_url).close()
    runner = CliRunner()
    query = COUNT_TO.format(SQL_TABLE_ROWS + 500)
    drawn_rows = runner.invoke(app, ["--db", sqlite_url, "sql", query, "--limit", "5000"])
    assert drawn_rows.exit_code == 0, drawn_rows.output
    numbers = [line.strip() for line in drawn_rows.stdout.splitlines() if line.strip().isdigit()]
    assert numbers == [str(x) for x in range(1, SQL_TABLE_ROWS + 1)]
    assert f"a table shows at most {SQL_TABLE_ROWS:,}" in drawn_rows.stderr
    assert "--json" in drawn_rows.stderr
    piped = runner.invoke(app, ["--db", sqlite_url, "sql", query, "--limit", "5000", "--json"])
    assert piped.exit_code == 0, piped.output
    assert len(json.loads(piped.stdout)) == SQL_TABLE_ROWS + 500
    assert piped.stderr == ""
    small = runner.invoke(app, ["--db", sqlite_url, "sql", COUNT_TO.format(20), "--limit", "10"])
    assert "pass --limit to see more" in small.stderr
