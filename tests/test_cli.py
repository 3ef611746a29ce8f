"""The command line, through Typer's runner and through a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from memstore.cli import app
from memstore.store.migrate import head_revision

from .conftest import LEGACY, LEGACY_FILES

runner = CliRunner()


def invoke(db: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", db, *args])
    return result.exit_code, result.stdout, result.stderr


def test_every_command_has_help_text() -> None:
    def walk(command: Any, path: str) -> None:
        assert command.help, f"{path} has no help"
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(get_command(app), "memstore")


def test_import_then_export_all_is_byte_identical(database_url: str, tmp_path: Path) -> None:
    code, stdout, _ = invoke(database_url, "import", str(LEGACY))
    assert code == 0
    assert "large-session" in stdout
    code, _, _ = invoke(database_url, "export", "--all", "-o", str(tmp_path / "out"))
    assert code == 0
    for path in LEGACY_FILES:
        assert (tmp_path / "out" / path.name).read_bytes() == path.read_bytes()


def test_import_json_report_parses_back(database_url: str) -> None:
    code, stdout, _ = invoke(database_url, "import", "--json", str(LEGACY / "branching.jsonl"))
    assert code == 0
    (item,) = json.loads(stdout)["files"]
    assert (item["sessionId"], item["records"], item["nodes"]) == ("branching", 56, 28)
    code, stdout, _ = invoke(database_url, "import", "--json", str(LEGACY / "branching.jsonl"))
    assert json.loads(stdout)["files"][0]["unchanged"] is True


def test_a_bad_file_is_reported_and_the_others_still_import(
    sqlite_url: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n")
    code, stdout, stderr = invoke(sqlite_url, "import", str(bad), str(LEGACY / "unicode.jsonl"))
    assert code == 1
    assert "bad.jsonl:1: not valid JSON" in stderr
    assert "Traceback" not in stderr
    assert "unicode" in stdout


def test_export_needs_a_session_or_all(sqlite_url: str, tmp_path: Path) -> None:
    code, _, stderr = invoke(sqlite_url, "export", "-o", str(tmp_path / "x"))
    assert code == 2
    assert "--all" in stderr
    assert invoke(sqlite_url, "db", "upgrade")[0] == 0
    code, _, stderr = invoke(sqlite_url, "export", "nope", "-o", str(tmp_path / "x.jsonl"))
    assert code == 1
    assert stderr.strip() == "error: no session 'nope'"


def test_db_current_json(sqlite_url: str) -> None:
    assert invoke(sqlite_url, "db", "upgrade", "0011")[0] == 0
    code, stdout, _ = invoke(sqlite_url, "db", "current", "--json")
    assert code == 1  # not up to date
    expected = {"current": "0011", "head": head_revision(), "upToDate": False, "state": "behind"}
    assert json.loads(stdout) == expected
    assert invoke(sqlite_url, "db", "upgrade")[0] == 0
    code, stdout, _ = invoke(sqlite_url, "db", "current", "--json")
    assert code == 0
    expected = {"current": head_revision(), "head": head_revision(), "upToDate": True}
    assert json.loads(stdout) == {**expected, "state": "current"}


def test_demo_builds_sessions_and_is_repeatable(sqlite_url: str, tmp_path: Path) -> None:
    for _ in range(2):
        code, stdout, _ = invoke(sqlite_url, "demo", "--workdir", str(tmp_path))
        assert code == 0, stdout
    assert "demo-config-parser" in stdout
    assert "◀ head" in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--db", "mysql://x/y", "db", "current"], "unsupported database 'mysql'"),
        (["--db", "sqlite:////nonexistent-dir/x.db", "demo"], "unable to open database file"),
        (["import", "/nonexistent.jsonl"], "no such file or directory"),
    ],
)
def test_errors_are_one_line_in_a_real_process(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memstore.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert message in line


@pytest.fixture
def imported(sqlite_url: str) -> str:
    code, _, _ = invoke(sqlite_url, "import", str(LEGACY))
    assert code == 0
    return sqlite_url


def test_sessions_lists_nodes_and_branches(imported: str) -> None:
    code, stdout, _ = invoke(imported, "sessions", "--json")
    assert code == 0
    sessions = {item["sessionId"]: item for item in json.loads(stdout)}
    assert sessions["branching"]["nodes"] == 28
    assert sessions["branching"]["branches"] == 5
    assert sessions["branching"]["head"] == "35e3729593e09384f705b19d7b9d7588"
    code, stdout, _ = invoke(imported, "sessions")
    assert "branching" in stdout


def test_tree_marks_the_head_and_shows_every_node(imported: str) -> None:
    code, stdout, _ = invoke(imported, "tree", "branching")
    assert code == 0
    assert "◀ head" in stdout
    code, stdout, _ = invoke(imported, "tree", "branching", "--json")
    tree = json.loads(stdout)
    assert len(tree["nodes"]) == 28
    assert tree["head"] == "35e3729593e09384f705b19d7b9d7588"
    code, stdout, _ = invoke(imported, "tree", "large-session")  # 2,904 deep: no recursion
    assert code == 0
    assert " turns …" in stdout
    code, unfolded, _ = invoke(imported, "tree", "large-session", "--all-turns")
    assert code == 0
    assert len(unfolded.splitlines()) > 5 * len(stdout.splitlines())
    code, shallow, _ = invoke(imported, "tree", "branching", "--depth", "0")
    assert code == 0
    assert "raise --depth" in shallow
    assert "raise --depth" not in invoke(imported, "tree", "branching")[1]


def test_show_prints_one_path(imported: str) -> None:
    code, stdout, _ = invoke(imported, "show", "branching", "--json")
    assert code == 0
    assert len(json.loads(stdout)) == 12
    code, stdout, _ = invoke(imported, "show", "branching", "--last", "2", "--json")
    assert [n["id"] for n in json.loads(stdout)][-1] == "35e3729593e09384f705b19d7b9d7588"
    code, stdout, _ = invoke(imported, "show", "branching")
    assert "Summarize the plan" in stdout
    code, _, stderr = invoke(imported, "show", "branching", "--leaf", "nope")
    assert code == 1
    assert "has no node 'nope'" in stderr


def test_search_and_sql_and_stats(imported: str) -> None:
    code, stdout, _ = invoke(imported, "search", "crash safe", "--json")
    assert code == 0
    hits = json.loads(stdout)
    assert hits
    assert hits[0]["sessionId"] == "branching"
    code, stdout, _ = invoke(imported, "sql", "SELECT count(*) AS n FROM turns", "--json")
    assert json.loads(stdout) == [{"n": 3254}]
    code, _, stderr = invoke(imported, "sql", "DELETE FROM nodes")
    assert code == 1
    assert "cannot change the database" in stderr
    code, stdout, _ = invoke(imported, "stats", "--json")
    totals = json.loads(stdout)
    assert (totals["sessions"], totals["nodes"]) == (12, 3254)
    assert totals["topTools"][0] == ["bash", 352]


def test_export_markdown_and_html(imported: str, tmp_path: Path) -> None:
    code, _, _ = invoke(
        imported, "export", "branching", "--format", "md", "-o", str(tmp_path / "b.md")
    )
    assert code == 0
    assert "Summarize the plan" in (tmp_path / "b.md").read_text()
    code, _, _ = invoke(imported, "export", "--all", "--format", "html", "-o", str(tmp_path / "h"))
    assert code == 0
    page = (tmp_path / "h" / "branching.html").read_text()
    assert "35e3729593e09384f705b19d7b9d7588" in page
    assert "http://" not in page
    assert "https://" not in page
    assert len(list((tmp_path / "h").glob("*.html"))) == 12


@pytest.mark.parametrize(
    "args",
    [["tree", "nope"], ["show", "nope"], ["export", "nope", "--format", "md", "-o", "x.md"]],
)
def test_unknown_sessions_are_one_line(sqlite_url: str, args: list[str]) -> None:
    assert invoke(sqlite_url, "db", "upgrade")[0] == 0
    code, _, stderr = invoke(sqlite_url, *args)
    assert code == 1
    assert stderr.strip() == "error: no session 'nope'"


def test_the_demo_shows_everything_it_promises(sqlite_url: str, tmp_path: Path) -> None:
    code, stdout, _ = invoke(sqlite_url, "demo", "--workdir", str(tmp_path / "work"))
    assert code == 0
    assert "imported 2 legacy JSONL files" in stdout
    assert "byte-identical to the original: True" in stdout
    assert "search: 'upload race'" in stdout
    assert "run_tests" in stdout  # the SQL table


def test_compact_makes_a_new_branch_offline(imported: str) -> None:
    code, stdout, _ = invoke(imported, "compact", "large-session", "--keep-recent", "4", "--json")
    assert code == 0
    result = json.loads(stdout)
    assert result["changed"] is True
    assert result["previousHead"] == "0ba4d965ed6b683279ad378318db02b1"
    code, stdout, _ = invoke(imported, "show", "large-session", "--json")
    path = json.loads(stdout)
    assert path[0]["turn"]["blocks"][0]["text"].startswith("[condensed earlier context]")
    assert path[0]["turn"]["memstore"]["condensed"]["fromNodeId"] == result["previousHead"]
    assert path[-1]["id"] == result["newHead"]
    code, _, stderr = invoke(imported, "compact", "nope")
    assert code == 1
    assert "nope" in stderr


@pytest.mark.slow
def test_every_command_runs_in_a_real_process(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    base = [sys.executable, "-m", "memstore.cli", "--db", db]
    commands = [
        ["db", "upgrade"],
        ["db", "current", "--json"],
        ["import", str(LEGACY / "branching.jsonl"), "--json"],
        ["sessions", "--json"],
        ["tree", "branching", "--json"],
        ["show", "branching", "--json"],
        ["search", "crash", "--json"],
        ["sql", "SELECT count(*) AS n FROM nodes", "--json"],
        ["stats", "--json"],
        ["export", "branching", "-o", str(tmp_path / "b.jsonl")],
        ["export", "--all", "--format", "html", "-o", str(tmp_path / "html")],
        ["compact", "branching", "--json"],
        ["demo", "--workdir", str(tmp_path / "demo")],
        ["db", "downgrade", "base", "--yes"],
    ]
    for command in commands:
        done = subprocess.run([*base, *command], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (command, done.stderr)
        if "--json" in command:
            json.loads(done.stdout)
    assert (tmp_path / "b.jsonl").read_bytes() == (LEGACY / "branching.jsonl").read_bytes()


def test_import_redact_secrets_counts_the_turns_it_changed(
    database_url: str, tmp_path: Path
) -> None:
    from memstore import SessionStore
    from memstore.cli.files import _import_line
    from memstore.store.import_batch import FileImport

    key = "sk-proj-" + "a1B2" * 8
    source = tmp_path / "s.jsonl"
    with SessionStore(f"sqlite:///{tmp_path / 'source.db'}") as store:
        turns = [
            {"role": "user", "blocks": [{"kind": "text", "text": f"{n} {key}"}]} for n in (1, 2)
        ]
        store.append_many("s", [*turns, {"role": "user", "blocks": []}], created_at=5)
        store.export_jsonl("s", source)
    code, stdout, _ = invoke(database_url, "import", "--redact-secrets", "--json", str(source))
    assert code == 0
    (item,) = json.loads(stdout)["files"]
    assert (item["sessionId"], item["nodes"], item["redacted"]) == ("s", 3, 2)
    exported = tmp_path / "out.jsonl"
    assert invoke(database_url, "export", "s", "-o", str(exported))[0] == 0
    assert key not in exported.read_text()
    assert "[REDACTED:openai-key]" in exported.read_text()
    # Again with the redactor: recognised as imported; the table has a column for the count.
    code, stdout, _ = invoke(database_url, "import", "--redact-secrets", str(source))
    assert code == 0
    assert "redacted" in stdout
    assert "unchanged" in stdout
    # Without it, the file's lines are not what the session holds: refused, naming the line.
    code, _, stderr = invoke(database_url, "import", str(source))
    assert code == 1
    assert "s.jsonl:1: this line differs" in stderr
    # A watch prints one line per file that changed.
    line = _import_line(FileImport(source, "s", records=4, nodes=2, redacted=2))
    assert line == "s: +4 lines, +2 nodes, 2 turns redacted"


def test_show_prints_a_text_output_of_a_tool_as_its_lines(database_url: str) -> None:
    """A tool result whose output is a string (a file read, a command's output: what pi and
    Claude Code write) shows as its lines, not as a JSON string with its newlines escaped."""
    from memstore import SessionStore

    store = SessionStore(database_url)
    call = {"kind": "tool_call", "id": "c1", "name": "bash", "input": {"command": "ls"}}
    output = 'a.py\n"b".py [x]\n  indented'
    store.append_many("tools", [
        {"role": "assistant", "blocks": [call]},
        {"role": "user", "blocks": [{"kind": "tool_result", "callId": "c1", "output": output}]},
        {"role": "user", "blocks": [{"kind": "tool_result", "callId": "c2", "output": {"n": 1}}]},
    ])  # fmt: skip
    store.close()
    code, stdout, _ = invoke(database_url, "show", "tools")
    assert code == 0
    lines = [line.strip("│ ") for line in stdout.splitlines()]
    assert [line for line in lines if line in ("a.py", '"b".py [x]', "indented")] == [
        "a.py",
        '"b".py [x]',
        "indented",
    ]
    assert "\\n" not in stdout
    assert '{"n":1}' in stdout.replace(" ", "")  # other values stay JSON
