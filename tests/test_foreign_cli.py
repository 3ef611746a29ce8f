"""`memstore import --from pi|claude-code|auto`, `--watch`, and `memstore export --to`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memstore.cli import app
from memstore.store import SessionStore

from .foreign_lines import claude_code_lines, pi_lines, write_lines

runner = CliRunner()


def invoke(db: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", db, *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def agents_home(tmp_path: Path) -> Path:
    """A pi session, a Claude Code session and its subagent's transcript, in the agents' folders."""
    home = tmp_path / "home"
    write_lines(home / ".pi/agent/sessions/--work-demo--/2025_p1.jsonl", pi_lines("p1", 3))
    project = home / ".claude/projects/-work-demo"
    write_lines(project / "c1.jsonl", claude_code_lines("c1", 2))
    write_lines(project / "c1/subagents/agent-a7.jsonl", claude_code_lines("c1", 1))
    return home


def test_import_from_auto_reads_both_agents_and_their_subagents(
    database_url: str, agents_home: Path
) -> None:
    code, stdout, stderr = invoke(
        database_url, "import", "--from", "auto", "--json", str(agents_home)
    )
    assert (code, stderr) == (0, "")
    files = json.loads(stdout)["files"]
    assert sorted((item["sessionId"], item["nodes"]) for item in files) == [
        ("2025_p1", 12),
        ("c1", 4),
        ("c1~agent-a7", 2),
    ]
    with SessionStore(database_url) as store:
        assert store.session_info("c1~agent-a7").metadata["parentSession"] == "c1"
        assert store.session_info("2025_p1").metadata["agent"] == "pi"
    code, stdout, _ = invoke(database_url, "import", "--from", "auto", "--json", str(agents_home))
    assert code == 0
    assert all(item["unchanged"] for item in json.loads(stdout)["files"])


def test_import_from_one_agent_refuses_the_others_files(sqlite_url: str, agents_home: Path) -> None:
    code, stdout, stderr = invoke(sqlite_url, "import", "--from", "pi", str(agents_home))
    assert code == 1
    refusal = "c1.jsonl: looks like a Claude Code transcript, not a pi session: use --from"
    assert refusal in stderr.replace("\n", "")
    assert "2025_p1" in stdout
    with SessionStore(sqlite_url) as store:
        assert store.list_sessions() == ["2025_p1"]


def test_a_bad_line_names_its_file_and_line_and_the_other_files_import(
    sqlite_url: str, agents_home: Path
) -> None:
    bad = agents_home / ".claude/projects/-work-demo/c1.jsonl"
    lines = bad.read_bytes().splitlines(keepends=True)
    bad.write_bytes(lines[0] + b'{"type":"user","uuid":\n' + b"".join(lines[2:]))
    code, _, stderr = invoke(sqlite_url, "import", "--from", "claude-code", str(bad.parent))
    assert code == 1
    assert f"{bad}:2: not valid JSON" in stderr.replace("\n", "")
    assert "Traceback" not in stderr
    with SessionStore(sqlite_url) as store:
        assert store.list_sessions() == ["c1~agent-a7"]


def test_session_only_names_a_legacy_file(sqlite_url: str, agents_home: Path) -> None:
    code, _, stderr = invoke(
        sqlite_url, "import", "--from", "pi", "--session", "x", str(agents_home)
    )
    assert code == 2
    assert "--from jsonl" in stderr


def test_progress_is_reported_in_bytes_and_records(sqlite_url: str, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "long.jsonl", pi_lines("long", 1000))
    seen: list[tuple[int, int]] = []
    with SessionStore(sqlite_url) as store:
        store.import_pi(path, progress=lambda done, records: seen.append((done, records)))
    assert len(seen) >= 2
    assert seen == sorted(seen)
    assert 0 < seen[-1][0] <= path.stat().st_size
    assert seen[-1][1] <= 4001


# --- watching -----------------------------------------------------------------------------------


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _sessions(url: str) -> dict[str, int]:
    with SessionStore(url) as store:
        return {info.id: info.node_count for info in store.sessions()}


def test_watch_imports_new_and_grown_files_until_interrupted(
    database_url: str, tmp_path: Path
) -> None:
    pi_dir, claude_dir = tmp_path / "pi", tmp_path / "claude"
    pi_dir.mkdir()
    claude_dir.mkdir()
    full = pi_lines("w1", 4)
    live = write_lines(pi_dir / "w1.jsonl", full[:5])
    SessionStore(database_url).close()  # the schema exists before the watcher polls it
    command = [sys.executable, "-m", "memstore.cli", "--db", database_url, "import"]
    command += ["--from", "auto", "--watch", "--interval", "0.1", str(pi_dir), str(claude_dir)]
    env = {**os.environ, "COLUMNS": "200"}
    watcher = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _wait_for(lambda: _sessions(database_url) == {"w1": 4}, "the first file")
        with live.open("ab") as file:  # the agent goes on, and a torn line is half written
            file.write(b"".join(full[5:-1]) + full[-1][:10])
        _wait_for(lambda: _sessions(database_url) == {"w1": 15}, "the grown file")
        with live.open("ab") as file:
            file.write(full[-1][10:])
        write_lines(claude_dir / "proj" / "c9.jsonl", claude_code_lines("c9", 2))
        _wait_for(lambda: _sessions(database_url) == {"w1": 16, "c9": 4}, "the new file")
    finally:
        watcher.send_signal(signal.SIGTERM)
        stdout, stderr = watcher.communicate(timeout=120)
    assert watcher.returncode == 0, stderr
    assert stderr.strip().endswith("stopped watching")
    assert "torn" in stdout
    assert [line.split(":")[0] for line in stdout.splitlines() if "+" in line] == [
        "w1",
        "w1",
        "w1",
        "c9",
    ]
    out = tmp_path / "w1.out"
    with SessionStore(database_url) as store:
        store.export_jsonl("w1", out)
    assert out.read_bytes() == b"".join(full)


def test_sessions_search_and_views_name_each_sessions_agent(
    database_url: str, agents_home: Path
) -> None:
    with SessionStore(database_url) as store:
        store.session("native").append(
            {"role": "user", "blocks": [{"kind": "text", "text": "zebras"}]}
        )
        store.import_foreign(agents_home)
        agents = {info.id: info.agent for info in store.sessions()}
        hits = {(hit.session_id, hit.agent) for hit in store.search("zebras")}
        view = store.read_only_query("SELECT session_id, agent FROM session_sources").rows
    expected = {
        "native": "memstore",
        "2025_p1": "pi",
        "c1": "claude-code",
        "c1~agent-a7": "claude-code",
    }
    assert agents == expected
    assert hits == set(expected.items())
    assert {tuple(row) for row in view} == set(expected.items())
    code, stdout, _ = invoke(database_url, "sessions", "--json")
    assert code == 0
    assert {item["sessionId"]: item["agent"] for item in json.loads(stdout)} == expected
    code, stdout, _ = invoke(database_url, "search", "--json", "zebras")
    assert {(hit["sessionId"], hit["agent"]) for hit in json.loads(stdout)} == hits
    code, stdout, _ = invoke(database_url, "sessions")
    assert "agent" in stdout
    assert "claude-" in stdout  # the column may wrap "claude-code" on a narrow terminal


# --- export --to --------------------------------------------------------------------------------


def test_export_to_writes_an_imported_session_back_and_refuses_another_agents(
    database_url: str, agents_home: Path, tmp_path: Path
) -> None:
    with SessionStore(database_url) as store:
        store.import_foreign(agents_home)
        store.session("native").append({"role": "user", "blocks": [{"kind": "text", "text": "x"}]})
    out = tmp_path / "c1.jsonl"
    code, stdout, _ = invoke(database_url, "export", "c1", "--to", "claude-code", "-o", str(out))
    assert code == 0, stdout
    assert out.read_bytes() == (agents_home / ".claude/projects/-work-demo/c1.jsonl").read_bytes()
    for session, agent, came_from in [
        ("c1", "pi", "claude-code"),
        ("2025_p1", "claude-code", "pi"),
        ("native", "pi", "memstore"),
    ]:
        code, _, stderr = invoke(database_url, "export", session, "--to", agent, "-o", str(out))
        assert code == 1
        assert f"came from {came_from}, not {agent}" in stderr.replace("\n", " ")
    code, _, stderr = invoke(database_url, "export", "c1", "--to", "pi", "--format", "md")
    assert code == 2


@pytest.mark.parametrize(
    ("agent", "folder"), [("pi", ".pi/agent/sessions"), ("claude-code", ".claude/projects")]
)
def test_export_all_to_rebuilds_the_agents_own_folders(
    sqlite_url: str, agents_home: Path, tmp_path: Path, agent: str, folder: str
) -> None:
    with SessionStore(sqlite_url) as store:
        store.import_foreign(agents_home)
    out = tmp_path / "out"
    code, stdout, _ = invoke(sqlite_url, "export", "--all", "--to", agent, "-o", str(out))
    assert code == 0, stdout
    source = agents_home / folder

    def tree(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.jsonl")}

    assert tree(out) == tree(source)
    assert tree(out)
